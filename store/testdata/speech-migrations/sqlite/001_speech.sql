-- The speech principal's heard ledger and announcement queue (P-19).
-- They hold no clinical text: only who, which fact, which versions, and state.
CREATE TABLE IF NOT EXISTS speech_heard (
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    PRIMARY KEY (patient, uri)
);

CREATE TABLE IF NOT EXISTS speech_announcements (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    patient      TEXT    NOT NULL,
    uri          TEXT    NOT NULL,
    from_version INTEGER NOT NULL CHECK (from_version >= 0),
    to_version   INTEGER NOT NULL CHECK (to_version >= 1),
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'heard', 'dropped'))
);

CREATE UNIQUE INDEX IF NOT EXISTS speech_announcements_one_pending
    ON speech_announcements (patient, uri) WHERE state = 'pending';

CREATE INDEX IF NOT EXISTS speech_announcements_by_patient
    ON speech_announcements (patient, state, id);
