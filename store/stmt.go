package store

import (
	"context"
	"database/sql"
)

// The write path runs the same dozen statements for every Publish; parsing
// SQL was a quarter of its CPU. These helpers prepare each statement once
// per Store (and database/sql once per connection) and reuse it.

// prepared returns the cached prepared statement for query (already in the
// dialect's placeholder style), preparing it on first use.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// rebound is s.d.rebind(query), kept per query: a batch's write statement
// on Postgres is assembled for each batch (writeBatchPostgres) and comes in
// a few shapes, and rewriting its ~2.5 KB every time cost 130 µs a batch
// under the write lock.
func (s *Store) rebound(query string) string {
	if q, ok := s.rebinds.Load(query); ok {
		return q.(string)
	}
	q := s.d.rebind(query)
	s.rebinds.Store(query, q)
	return q
}

// queryRowPrepared runs query on q (the *sql.DB or a *sql.Tx) through its
// cached prepared statement. If preparing fails it runs the query directly,
// so the caller sees the database's own error from Scan.
func (s *Store) queryRowPrepared(ctx context.Context, q queryRower, query string, args ...any) *sql.Row {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return q.QueryRowContext(ctx, query, args...)
	}
	if tx, ok := q.(*sql.Tx); ok {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// queryPrepared runs query on the database through its cached prepared
// statement (the change feed's catch-up query runs after every commit).
func (s *Store) queryPrepared(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return s.db.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// queryTxPrepared runs query in tx through its cached prepared statement.
func (s *Store) queryTxPrepared(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

// execPrepared runs query in tx through its cached prepared statement.
func (s *Store) execPrepared(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// closeStatements closes every cached statement (on Close).
func (s *Store) closeStatements() {
	s.stmts.Range(func(k, v any) bool {
		_ = v.(*sql.Stmt).Close()
		s.stmts.Delete(k)
		return true
	})
}
