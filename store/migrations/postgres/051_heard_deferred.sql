-- 051: speech_heard.deferred_heard, deferred_from (P-24; store/heardledger.go):
-- the rollback an earlier response's SessionEndedRequest ERROR asked for
-- while the heard version was confirmed by a later response (reopenable =
-- 0, migration 050): the version heard before it and the version its
-- retraction withdrew. NULL when none. When the confirming response is
-- reported not played too, the rollback is done then, so a double failure
-- never loses the retraction. Any change of the heard version clears them.
-- reopenable takes a third value, 2: reopenable, and the next confirmation
-- is void (the confirming response's report arrived before its marking);
-- MarkTold then makes it 1.
ALTER TABLE speech_heard ADD COLUMN IF NOT EXISTS deferred_heard INTEGER;
ALTER TABLE speech_heard ADD COLUMN IF NOT EXISTS deferred_from INTEGER;
