package speech

import (
	"context"
	"database/sql"
)

// A turn reads the ledger several times (Pending, Facts, and MarkTold's
// heard and pending checks); parsing that SQL afresh each time was a sixth
// of a verified Launch's CPU. The ledger's reads go through statements
// prepared once per ledger (and by database/sql once per connection).

// prepared returns the cached prepared statement for query (in the
// dialect's placeholder style already), preparing it on first use.
func (l *ledger) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := l.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := l.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := l.stmts.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// queryRow runs query on db (the ledger's *sql.DB or one of its
// transactions) through its prepared statement; if preparing fails it
// runs the query directly, so Scan returns the database's own error.
func (l *ledger) queryRow(ctx context.Context, db querier, query string, args ...any) *sql.Row {
	st, err := l.prepared(ctx, query)
	if err != nil {
		return db.QueryRowContext(ctx, query, args...)
	}
	switch q := db.(type) {
	case *sql.Tx:
		return q.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	case *sql.DB:
		if q == l.db {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return db.QueryRowContext(ctx, query, args...)
}

// query runs query on the ledger's database through its prepared statement.
func (l *ledger) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := l.prepared(ctx, query)
	if err != nil {
		return l.db.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}
