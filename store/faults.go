package store

import (
	"context"
	"errors"
	"fmt"
)

// SimulateFullDisk makes every later write that needs a new database page
// fail as on a full disk (SQLITE_FULL: Publish answers ErrUnavailable
// naming the disk, and WriteHealth reports it), until restore is called —
// a fault drill for the layers above the store (the HTTP API's 503). It
// pins SQLite's max_page_count at the current size on the pool's only
// connection: the pool is cut to one connection for the rest of the
// store's life, so call it on a store opened for the drill, after
// warming the paths the drill writes through (a statement prepared later
// needs a connection of its own). On Postgres it is an error.
func (s *Store) SimulateFullDisk(ctx context.Context) (restore func() error, err error) {
	if _, ok := s.d.(sqliteDialect); !ok {
		return nil, errors.New("store: SimulateFullDisk: SQLite only")
	}
	s.db.SetMaxOpenConns(1)
	var pages int
	if err := s.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		return nil, fmt.Errorf("store: SimulateFullDisk: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		return nil, fmt.Errorf("store: SimulateFullDisk: %w", err)
	}
	return func() error {
		_, err := s.db.ExecContext(context.WithoutCancel(ctx), `PRAGMA max_page_count = 1073741823`)
		return err
	}, nil
}
