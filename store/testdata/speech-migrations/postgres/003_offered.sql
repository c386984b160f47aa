-- Announcements put in a response whose delivery was never confirmed (a
-- failed write, a crash before the heard ledger's commit). They stay owed
-- and are spoken again, saying so (P-24). Only the announcement's id.
CREATE TABLE IF NOT EXISTS speech_offered (
    announcement_id BIGINT NOT NULL PRIMARY KEY
);
