-- 010: repeated refusals collapse into one audit row (store/audit.go): count
-- is how many identical attempts the row stands for, last_at the last one's
-- time (ms; 0 while count = 1). A row's MAC covers both once count > 1.
ALTER TABLE audit ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE audit ADD COLUMN last_at INTEGER NOT NULL DEFAULT 0;
