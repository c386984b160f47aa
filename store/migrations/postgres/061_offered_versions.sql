-- 061: speech_offered_version holds every version Ray may have heard of a
-- fact, one row per version (P-19, P-24; store/heardledger.go; finding
-- F10): each offered in a response whose delivery was never confirmed,
-- since the last confirmed one. Until now it kept one version per fact,
-- so a second unconfirmed offer replaced the first and the next
-- retraction never withdrew the words of the first. The rows already
-- held are kept (a wider key admits them all); a confirmed delivery
-- still clears every version up to the one confirmed.
-- The old key is found by kind, not assumed by name.
DO $$
DECLARE pk text;
BEGIN
    SELECT conname INTO pk FROM pg_constraint
    WHERE conrelid = 'speech_offered_version'::regclass AND contype = 'p';
    IF pk IS NOT NULL THEN
        EXECUTE format('ALTER TABLE speech_offered_version DROP CONSTRAINT %I', pk);
    END IF;
END $$;
ALTER TABLE speech_offered_version ADD PRIMARY KEY (patient, uri, version);
