-- 002: named leases with expiry (the speech lease: one instance speaks for a
-- patient at a time). See store/lease.go.
CREATE TABLE leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL -- ms; the lease is free at and after this instant
);
