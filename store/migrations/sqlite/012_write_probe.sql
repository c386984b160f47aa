-- 012: one row that Store.WriteHealth rewrites to learn whether a write can
-- commit (a full or read-only disk, an unreachable database) without
-- touching care data. at_ms is the last probe's time.
CREATE TABLE write_probe (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    at_ms INTEGER NOT NULL
);
INSERT INTO write_probe (id, at_ms) VALUES (1, 0);
