-- 012 (Postgres): as migrations/sqlite/012_write_probe.sql.
CREATE TABLE write_probe (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    at_ms BIGINT  NOT NULL
);
INSERT INTO write_probe (id, at_ms) VALUES (1, 0);
