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

-- Offers recorded by announcement id (003) become offered versions, once.
INSERT INTO speech_offered_version (patient, uri, version)
SELECT a.patient, a.uri, a.to_version FROM speech_offered o JOIN speech_announcements a ON a.id = o.announcement_id
WHERE a.state = 'pending'
ON CONFLICT (patient, uri) DO NOTHING;

DELETE FROM speech_offered;
