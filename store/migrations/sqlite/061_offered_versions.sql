-- 061: speech_offered_version holds every version Ray may have heard of a
-- fact, one row per version (P-19, P-24; store/heardledger.go; finding
-- F10): each offered in a response whose delivery was never confirmed,
-- since the last confirmed one. Until now it kept one version per fact,
-- so a second unconfirmed offer replaced the first and the next
-- retraction never withdrew the words of the first. The rows already
-- held are kept; a confirmed delivery still clears every version up to
-- the one confirmed. SQLite cannot change a primary key in place: the
-- table is rebuilt under the same name.
CREATE TABLE speech_offered_version_061 (
    patient TEXT    NOT NULL,
    uri     TEXT    NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 1),
    PRIMARY KEY (patient, uri, version)
);

INSERT INTO speech_offered_version_061 (patient, uri, version)
SELECT patient, uri, version FROM speech_offered_version;

DROP TABLE speech_offered_version;

ALTER TABLE speech_offered_version_061 RENAME TO speech_offered_version;
