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
