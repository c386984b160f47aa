-- 066: alexa_request_seen (P-22; store/alexareplay.go): the replay memory
-- the instances serving the Alexa skill share. digest: SHA-256 of a
-- verified request's request.requestId (32 bytes; the id itself is not
-- kept); until_ms: the end of its window, Unix milliseconds, after which
-- its own timestamp refuses a replay and the row is deleted.
CREATE TABLE IF NOT EXISTS alexa_request_seen (
    digest   BLOB PRIMARY KEY,
    until_ms INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS alexa_request_seen_until ON alexa_request_seen (until_ms);
