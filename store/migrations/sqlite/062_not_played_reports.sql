-- 062: speech_not_played (P-24, finding F14; store/heardreports.go): the
-- responses whose SessionEndedRequest ERROR report the heard ledger
-- applied (NotPlayed), by the response id the skill put in that
-- response's session attributes, so that the same report delivered again
-- (Alexa's retry, a late resend) re-opens nothing the first handled and
-- never undoes a delivery confirmed after it. at_ms: when it was applied
-- (Unix milliseconds, the principal's clock); rows older than a day
-- (models.NotPlayedMemory) are deleted by the next report. Only ids and
-- patients, no clinical text.
CREATE TABLE IF NOT EXISTS speech_not_played (
    patient  TEXT    NOT NULL,
    response TEXT    NOT NULL,
    at_ms    INTEGER NOT NULL,
    PRIMARY KEY (patient, response)
);

CREATE INDEX IF NOT EXISTS speech_not_played_at ON speech_not_played (at_ms);
