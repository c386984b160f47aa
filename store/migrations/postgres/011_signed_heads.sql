-- 011 (Postgres): as migrations/sqlite/011_signed_heads.sql: chain heads signed outside the database (P-26, store/heads.go). Each
-- version carries the Ed25519 signature made when it became its chain's head
-- (base64) and the signing key's id; the audit head carries the signature of
-- (count, last_mac). A database that already holds versions or audit rows is
-- marked legacy_unsigned: the server signs its current heads once, at its
-- next start, and clears the mark.
ALTER TABLE versions ADD COLUMN head_sig TEXT NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN head_key TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_head ADD COLUMN sig TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_head ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
CREATE TABLE signing_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    legacy_unsigned INTEGER NOT NULL
);
INSERT INTO signing_state (id, legacy_unsigned)
    SELECT 1, CASE WHEN EXISTS (SELECT 1 FROM versions) OR (SELECT count FROM audit_head WHERE id = 1) > 0 THEN 1 ELSE 0 END;
