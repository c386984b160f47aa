-- 040: the speech principal's heard ledger, announcement queue, baseline and
-- delivery log (P-19, P-24; store/heardledger.go, store/delivery.go). They
-- hold no clinical text: only who, which fact, which versions, state, times
-- and device kinds. Every statement is idempotent: a database a previous
-- build created already holds these tables (made by the speech package's
-- own migrations 001–010, which this one replaces) and keeps them as they are.

-- speech_heard: the version whose words Ray last heard for certain.
CREATE TABLE IF NOT EXISTS speech_heard (
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    PRIMARY KEY (patient, uri)
);

-- speech_announcements: the queue; at most one pending per fact.
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

-- What a patient's facts were when the speech principal first followed him:
-- his starting point, not news. Facts at or below their baseline are never
-- announced; a later revision, or a fact created later, is (P-19).
CREATE TABLE IF NOT EXISTS speech_followed (
    patient TEXT NOT NULL PRIMARY KEY
);

CREATE TABLE IF NOT EXISTS speech_baseline (
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    PRIMARY KEY (patient, uri)
);

-- What Ray may have heard of a fact: the version put in a response whose
-- delivery was never confirmed (a crash or a failed write before the heard
-- ledger's commit, or a turn still under way). A later revision withdraws
-- these words as well as the ones he heard for certain, and is spoken
-- saying so (P-19, P-24). Only versions; cleared once a delivery of that
-- version or a newer one is confirmed.
CREATE TABLE IF NOT EXISTS speech_offered_version (
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    PRIMARY KEY (patient, uri)
);

-- Offers recorded by announcement id (the speech package's 003, read once
-- by its 004 — a database that never ran 004 may still hold some) become
-- offered versions, once; then the table goes.
CREATE TABLE IF NOT EXISTS speech_offered (
    announcement_id INTEGER NOT NULL PRIMARY KEY
);

INSERT INTO speech_offered_version (patient, uri, version)
SELECT a.patient, a.uri, a.to_version FROM speech_offered o JOIN speech_announcements a ON a.id = o.announcement_id
WHERE a.state = 'pending'
ON CONFLICT (patient, uri) DO NOTHING;

DROP TABLE speech_offered;

-- The delivery log: when and how each version of a speakable fact reached
-- Ray (queued for him, offered to Alexa, heard — on which kind of device,
-- asked or unasked —, found unchanged, or announced by a notification), for
-- the clinician's timeline. At most one event of each kind per version (the
-- first).
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
