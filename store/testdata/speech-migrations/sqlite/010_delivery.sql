-- The delivery log: when and how each version of a speakable fact reached
-- Ray (queued for him, offered to Alexa, heard — on which kind of device,
-- asked or unasked —, found unchanged, or announced by a notification), for
-- the clinician's timeline. At most one event of each kind per version (the
-- first). Like the rest of the ledger it holds no clinical text.
CREATE TABLE IF NOT EXISTS speech_delivery (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    event   TEXT    NOT NULL CHECK (event IN ('queued', 'offered', 'heard', 'unchanged', 'notified')),
    at_ms   INTEGER NOT NULL,
    device  TEXT    NOT NULL DEFAULT '' CHECK (device IN ('', 'screen', 'voice')),
    via     TEXT    NOT NULL DEFAULT '' CHECK (via IN ('', 'asked', 'card', 'notification'))
);

CREATE UNIQUE INDEX IF NOT EXISTS speech_delivery_once
    ON speech_delivery (patient, uri, version, event);
