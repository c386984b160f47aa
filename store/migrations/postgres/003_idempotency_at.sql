-- 003: the replay cache is pruned by age on every signed write; index it so
-- pruning touches only the expired keys, not the whole cache.
CREATE INDEX IF NOT EXISTS idempotency_at_ms ON idempotency (at_ms);
