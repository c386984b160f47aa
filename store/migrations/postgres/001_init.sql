-- 001 (Postgres): the same tables as migrations/sqlite/001_init.sql.
-- Times are BIGINT milliseconds since the Unix epoch, UTC. The store's
-- queries are shared with SQLite, so column names and meanings match exactly.

-- One row per (patient, domain): its audience, fixed for life (P-3), and latest version.
CREATE TABLE facts (
    patient  TEXT    NOT NULL,
    domain   TEXT    NOT NULL,
    audience TEXT    NOT NULL CHECK (audience IN ('user', 'assistant')),
    latest   INTEGER NOT NULL,
    PRIMARY KEY (patient, domain)
);

-- Every version ever written. seq is the change feed's gap-free commit order:
-- allocated as MAX(seq)+1 under the store-wide advisory write lock.
CREATE TABLE versions (
    seq          BIGINT  PRIMARY KEY,
    patient      TEXT    NOT NULL,
    domain       TEXT    NOT NULL,
    n            INTEGER NOT NULL CHECK (n >= 1),
    audience     TEXT    NOT NULL,
    value        BYTEA   NOT NULL,           -- plaintext UTF-8, or sealed bytes when sealed = 1
    sealed       INTEGER NOT NULL DEFAULT 0,
    author_id    TEXT    NOT NULL,
    author_label TEXT    NOT NULL,
    written_at   BIGINT  NOT NULL,           -- ms
    stale_after  BIGINT  NOT NULL DEFAULT 0, -- ms; 0 = never stale
    priority     DOUBLE PRECISION NOT NULL,
    prev_hash    TEXT    NOT NULL,
    hash         TEXT    NOT NULL,
    UNIQUE (patient, domain, n)
);
CREATE INDEX versions_written_at ON versions (written_at);

-- Idempotency keys of recent writes (P-12 replay cache, 600 s window).
CREATE TABLE idempotency (
    key   TEXT   PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    seq   BIGINT NOT NULL
);

-- The HMAC-chained audit log (P-14). Rows are only ever appended.
CREATE TABLE audit (
    seq     BIGINT PRIMARY KEY,
    at      BIGINT NOT NULL, -- ms
    actor   TEXT   NOT NULL,
    uri     TEXT   NOT NULL,
    outcome TEXT   NOT NULL,
    reason  TEXT   NOT NULL,
    via     TEXT   NOT NULL,
    author  TEXT   NOT NULL,
    mac     TEXT   NOT NULL
);
-- The audit head: row count and last MAC, updated in the same transaction as
-- each append, so a truncated tail is detected.
CREATE TABLE audit_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    count    BIGINT  NOT NULL,
    last_mac TEXT    NOT NULL
);
INSERT INTO audit_head (id, count, last_mac) VALUES (1, 0, '');

-- Device linking: single-use six-digit codes, failed attempts, blocks, links.
CREATE TABLE link_codes (
    code       TEXT   PRIMARY KEY,
    patient    TEXT   NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE TABLE link_attempts (
    alexa_user_id TEXT   NOT NULL,
    at_ms         BIGINT NOT NULL
);
CREATE INDEX link_attempts_user ON link_attempts (alexa_user_id, at_ms);
CREATE TABLE link_blocks (
    alexa_user_id TEXT   PRIMARY KEY,
    until_ms      BIGINT NOT NULL
);
CREATE TABLE linked_users (
    alexa_user_id TEXT   PRIMARY KEY,
    patient       TEXT   NOT NULL,
    api_endpoint  TEXT   NOT NULL,
    linked_ms     BIGINT NOT NULL
);
CREATE INDEX linked_users_patient ON linked_users (patient);
