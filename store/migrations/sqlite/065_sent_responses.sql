-- 065: speech_sent_response (P-24, finding U8; store/heardresponses.go):
-- per patient and Alexa session, the record of the last responses written
-- on it that marked something heard — the response id the skill put in its
-- session attributes and its marks (a JSON list of {uri, heard_before,
-- from, version, confirmed}: URIs and versions only, no clinical text) —
-- written in the transaction that records the response's offers, so that
-- Alexa's SessionEndedRequest ERROR report of a response finds what it
-- marked on any instance and after a restart, whatever session attributes
-- Alexa echoes. The last two per session are kept (models.SentPerSession);
-- rows older than a day (models.SentMemory) are deleted by the next write.
-- at_ms: when the skill wrote the response (Unix milliseconds).
CREATE TABLE IF NOT EXISTS speech_sent_response (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    patient  TEXT    NOT NULL,
    session  TEXT    NOT NULL,
    response TEXT    NOT NULL,
    marks    TEXT    NOT NULL,
    at_ms    INTEGER NOT NULL
);

CREATE UNIQUE INDEX IF NOT EXISTS speech_sent_response_key ON speech_sent_response (patient, session, response);
CREATE INDEX IF NOT EXISTS speech_sent_response_at ON speech_sent_response (at_ms);
