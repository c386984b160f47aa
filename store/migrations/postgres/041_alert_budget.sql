-- 041: the audible budget (P-23; store/budget.go): one row per unasked
-- notification slot reserved for a patient, charged unless refunded, in ms.
-- Idempotent: a database a previous build created already holds the table
-- (made by skill/proactive's own schema, which this replaces).
CREATE TABLE IF NOT EXISTS alert_budget (
    id          BIGSERIAL PRIMARY KEY,
    patient     TEXT   NOT NULL,
    reserved_at BIGINT NOT NULL,
    state       TEXT   NOT NULL
);

CREATE INDEX IF NOT EXISTS alert_budget_patient ON alert_budget (patient, reserved_at);
