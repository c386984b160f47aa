-- 010 (Postgres): as migrations/sqlite/010_audit_repeats.sql.
ALTER TABLE audit ADD COLUMN count BIGINT NOT NULL DEFAULT 1;
ALTER TABLE audit ADD COLUMN last_at BIGINT NOT NULL DEFAULT 0;
