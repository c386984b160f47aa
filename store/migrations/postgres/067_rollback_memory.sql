-- 067: what a not-played report's rollback must put back (P-24;
-- store/heardledger.go, findings G5 and G8). Only patients, fact URIs,
-- versions and times, no clinical text.
--
-- speech_offered_cleared: the offers (speech_offered_version rows) a
-- delivery or settle of version cleared_by cleared. Until now they were
-- deleted, so when Alexa then reported that delivery not played the
-- rollback restored its own version alone: after several unplayed
-- retractions in a row only the last wording was withdrawn (G5). The
-- rollback of a delivery puts back the offers it cleared. Rows older
-- than a day (models.NotPlayedMemory) are deleted as the fact's offers
-- are next cleared, and by the next report.
CREATE TABLE IF NOT EXISTS speech_offered_cleared (
    patient      TEXT    NOT NULL,
    uri          TEXT    NOT NULL,
    version      BIGINT  NOT NULL CHECK (version >= 1),
    cleared_by   BIGINT  NOT NULL CHECK (cleared_by >= version),
    at_ms        BIGINT  NOT NULL,
    PRIMARY KEY (patient, uri, cleared_by, version)
);

CREATE INDEX IF NOT EXISTS speech_offered_cleared_at ON speech_offered_cleared (at_ms);

-- speech_unplayed: a delivery of version reported not played while a
-- later delivery had already moved what he heard, so it could not be
-- rolled back then (its words, heard_before, were the ones before it).
-- Until now the report was dropped, and when the later delivery was
-- reported not played too its rollback stopped at version: the next
-- retraction said "I told you" words he never got and lost the ones he
-- heard for certain (G8). A rollback that reaches version goes on to
-- heard_before. A later delivery of version itself deletes the row; rows
-- older than a day are deleted by the next report.
CREATE TABLE IF NOT EXISTS speech_unplayed (
    patient      TEXT    NOT NULL,
    uri          TEXT    NOT NULL,
    version      BIGINT  NOT NULL CHECK (version >= 1),
    heard_before BIGINT  NOT NULL CHECK (heard_before >= 0 AND heard_before < version),
    at_ms        BIGINT  NOT NULL,
    PRIMARY KEY (patient, uri, version)
);

CREATE INDEX IF NOT EXISTS speech_unplayed_at ON speech_unplayed (at_ms);
