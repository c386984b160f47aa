package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/unsay/unsay/models"
)

// The record of the responses written on each Alexa session
// (speech_sent_response, migration 065; P-24, finding U8). Alexa's error
// report of a response (SessionEndedRequest ERROR) echoes the session
// attributes Alexa held — for ENDPOINT_TIMEOUT or INVALID_RESPONSE those of
// the response before — so what the reported response itself marked is
// known only to whoever wrote it. Kept in the skill's memory alone, it is
// lost with a restart and unknown to another instance: the report then
// re-opens nothing and the retraction that response carried is lost. So
// the response's record is written here, in the transaction that records
// its offers (OfferedResponse: one more row in a transaction that already
// happens, never a transaction of its own), and read by the report
// (SentResponses), whichever instance it reaches. The last
// models.SentPerSession responses per session are kept; each write deletes
// the rows older than models.SentMemory, so the table holds a day of
// sessions.

// sentMark is one mark as speech_sent_response.marks keeps it (JSON).
type sentMark struct {
	URI         string `json:"uri"`
	HeardBefore int    `json:"heard_before"`
	From        int    `json:"from"`
	Version     int    `json:"version"`
	Confirmed   bool   `json:"confirmed,omitempty"`
}

// OfferedResponse is Offered, and in the same transaction it records sent
// as the last response written on its session for patient (the one before
// it stays, older ones go: models.SentPerSession), replacing the record of
// sent.Replaces. When Offered writes nothing (every offer a fact told at a
// version he heard) sent is recorded only when this telling will confirm a
// version (recordAlone) — once per version marked heard, never per turn
// (issue 17) — and else not at all.
func (l *HeardLedger) OfferedResponse(ctx context.Context, patient string, offers []models.LedgerOffer, sent models.LedgerSent, at time.Time) error {
	return l.offered(ctx, patient, offers, &sent, at)
}

// recordSent writes sent (nil: nothing) in tx, at atMS when sent.At is
// zero, and deletes what it replaces, the session's older rows and every
// row older than models.SentMemory.
func (l *HeardLedger) recordSent(ctx context.Context, tx *sql.Tx, patient string, sent *models.LedgerSent, atMS int64) error {
	if sent == nil {
		return nil
	}
	ms := make([]sentMark, 0, len(sent.Marks))
	for _, m := range sent.Marks {
		ms = append(ms, sentMark{URI: m.URI, HeardBefore: m.HeardBefore, From: m.From, Version: m.Version, Confirmed: m.Confirmed})
	}
	raw, err := json.Marshal(ms)
	if err != nil {
		return fmt.Errorf("store: heard ledger: record response: %w", err)
	}
	when := atMS
	if !sent.At.IsZero() {
		when = sent.At.UnixMilli()
	}
	if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_sent_response WHERE at_ms < ?"), when-models.SentMemory.Milliseconds()); err != nil {
		return fmt.Errorf("store: heard ledger: record response: forget old: %w", err)
	}
	if sent.Replaces != "" {
		if _, err := l.exec(ctx, tx, l.q("DELETE FROM speech_sent_response WHERE patient = ? AND session = ? AND response = ?"), patient, sent.Session, sent.Replaces); err != nil {
			return fmt.Errorf("store: heard ledger: record response: replace: %w", err)
		}
	}
	if _, err := l.exec(ctx, tx, l.q(`INSERT INTO speech_sent_response (patient, session, response, marks, at_ms) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (patient, session, response) DO UPDATE SET marks = excluded.marks, at_ms = excluded.at_ms`), patient, sent.Session, sent.Response, string(raw), when); err != nil {
		return fmt.Errorf("store: heard ledger: record response: %w", err)
	}
	if _, err := l.exec(ctx, tx, l.q(`DELETE FROM speech_sent_response WHERE patient = ? AND session = ? AND id NOT IN
(SELECT id FROM speech_sent_response WHERE patient = ? AND session = ? ORDER BY id DESC LIMIT ?)`), patient, sent.Session, patient, sent.Session, models.SentPerSession); err != nil {
		return fmt.Errorf("store: heard ledger: record response: keep the last: %w", err)
	}
	return nil
}

// SentResponses returns the record of the responses written on session
// for patient, the last first (at most models.SentPerSession), each
// unexpired at at (written less than models.SentMemory before it; zero:
// the ledger's clock), its marks carrying its id as Response.
func (l *HeardLedger) SentResponses(ctx context.Context, patient, session string, at time.Time) ([]models.LedgerSent, error) {
	since := l.stamp(at).Add(-models.SentMemory).UnixMilli()
	rows, err := l.s.queryPrepared(ctx, l.q(`SELECT response, marks, at_ms FROM speech_sent_response
WHERE patient = ? AND session = ? AND at_ms >= ? ORDER BY id DESC LIMIT ?`), patient, session, since, models.SentPerSession)
	if err != nil {
		return nil, fmt.Errorf("store: heard ledger: sent responses: %w", err)
	}
	defer rows.Close()
	var out []models.LedgerSent
	for rows.Next() {
		var (
			id, raw string
			atMS    int64
			ms      []sentMark
		)
		if err := rows.Scan(&id, &raw, &atMS); err != nil {
			return nil, fmt.Errorf("store: heard ledger: sent responses: %w", err)
		}
		if err := json.Unmarshal([]byte(raw), &ms); err != nil {
			return nil, fmt.Errorf("store: heard ledger: sent responses: %s: %w", id, err)
		}
		s := models.LedgerSent{Session: session, Response: id, At: time.UnixMilli(atMS).UTC()}
		for _, m := range ms {
			s.Marks = append(s.Marks, models.LedgerMark{URI: m.URI, HeardBefore: m.HeardBefore, From: m.From, Version: m.Version, Confirmed: m.Confirmed, Response: id})
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heard ledger: sent responses: %w", err)
	}
	return out, nil
}

// recordAlone reports whether sent (nil: no) must be recorded although its
// offers write nothing: one of its Confirmed marks tells the version he
// heard while that version is still reopenable (speech_heard.reopenable ≠
// 0: no later telling has confirmed it), so this telling will confirm it
// (MarkTold) and its own not-played report must be able to undo that on
// any instance, after any restart — else a double failure, the
// retraction's response and this telling's both not played, would lose the
// retraction (P-24, finding B1 with U8). The first telling after each
// marking pays one transaction (as its MarkTold does); later ones, and a
// response without Confirmed marks, only this read or nothing.
func (l *HeardLedger) recordAlone(ctx context.Context, patient string, sent *models.LedgerSent) (bool, error) {
	if sent == nil || !slices.ContainsFunc(sent.Marks, func(m models.LedgerMark) bool { return m.Confirmed }) {
		return false, nil
	}
	rows, err := l.s.queryPrepared(ctx, l.q("SELECT uri, version FROM speech_heard WHERE patient = ? AND reopenable <> 0"), patient)
	if err != nil {
		return false, fmt.Errorf("store: heard ledger: record response: reopenable: %w", err)
	}
	defer rows.Close()
	open := map[string]int{}
	for rows.Next() {
		var uri string
		var v int
		if err := rows.Scan(&uri, &v); err != nil {
			return false, fmt.Errorf("store: heard ledger: record response: reopenable: %w", err)
		}
		open[uri] = v
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("store: heard ledger: record response: reopenable: %w", err)
	}
	for _, m := range sent.Marks {
		if v, ok := open[m.URI]; ok && m.Confirmed && v == m.Version {
			return true, nil
		}
	}
	return false, nil
}
