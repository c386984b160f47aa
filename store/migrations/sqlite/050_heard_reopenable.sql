-- 050: speech_heard.reopenable (P-24; store/heardledger.go, finding B1):
-- 1 while Alexa's report that the response which set the heard version was
-- not played (SessionEndedRequest ERROR) may still re-open it; 0 once a
-- later response, written in full, carried that version's words — a
-- confirmed delivery no earlier response's report rolls back. Rows from
-- before keep the old rule (1).
ALTER TABLE speech_heard ADD COLUMN reopenable INTEGER NOT NULL DEFAULT 1;
