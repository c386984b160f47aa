package store

import (
	"context"
	"fmt"
	"time"

	"github.com/unsay/unsay/models"
)

// DemoNow is the pinned demo clock (RFC 3339). Seeding with it yields the
// same version hashes on every run (P-15, pinned in TestSeed_P15_*).
const DemoNow = "2026-10-08T09:14:00Z"

// DemoPatient is the demo seed's patient id (Ray Dunn).
const DemoPatient = "ray"

// DemoPatientName is the demo patient's name.
const DemoPatientName = "Ray Dunn"

const day = 24 * time.Hour

// seedRecord is one seeded version: the input and its offset before now.
type seedRecord struct {
	in  PublishInput
	ago time.Duration
}

// demoRecords returns the demo seed (reference/peers.md §1.2, in our own
// words): eight facts, eleven versions, in writing order. Every time — and
// the anticoagulant's end date written inside its sentence — derives from
// now. The last two versions carry the committed clips (seed_audio.go):
// the heel-slide count Ray may hear, and a gait recording for the
// assistant only; the versions before them are unchanged, so their hashes
// are too (P-15).
func demoRecords(now time.Time) []seedRecord {
	now = now.UTC()
	stop := now.AddDate(0, 0, -4)
	stopDay := time.Date(stop.Year(), stop.Month(), stop.Day(), 0, 0, 0, 0, time.UTC)
	rec := func(domain string, a models.Audience, value, author, label string, ago time.Duration, priority float64) seedRecord {
		return seedRecord{ago: ago, in: PublishInput{Patient: DemoPatient, Domain: domain, Audience: a, Value: value,
			AuthorID: author, AuthorLabel: label, Priority: priority}}
	}
	const (
		adeyemi = "Mr Adeyemi, surgical team"
		mensah  = "Dr Mensah, GP"
		okafor  = "Sarah Okafor, physio"
		ward4   = "Ward 4 admin"
	)
	anticoag := rec("anticoagulant", models.AudienceUser,
		fmt.Sprintf("Rivaroxaban 10 mg once a day, for a course due to end on %d %s %d.", stopDay.Day(), stopDay.Month(), stopDay.Year()),
		"gp.mensah", mensah, 9*day, 0.85)
	anticoag.in.StaleAfter = stopDay
	return []seedRecord{
		anticoag,
		rec("contact", models.AudienceUser,
			"Ward 4 physio line, weekdays 9 to 5: 01632 960 412. Out of hours, call 111.",
			"ward4", ward4, 5*day, 0.3),
		rec("risk", models.AudienceAssistant,
			"Fall risk HIGH. Lives alone Monday to Thursday; the family disputes the discharge plan.",
			"adeyemi", adeyemi, 5*day, 1.0),
		rec("weight_bearing", models.AudienceUser,
			"No weight through the operated leg; transfers with the frame only.",
			"adeyemi", adeyemi, 4*day, 0.9),
		rec("adherence", models.AudienceAssistant,
			"Adherence unreliable: tends to over-report exercise sessions.",
			"okafor", okafor, 3*day, 0.7),
		rec("weight_bearing", models.AudienceUser,
			"Partial weight-bearing, about half your body weight, with the frame.",
			"adeyemi", adeyemi, 2*day, 0.9),
		rec("gait_note", models.AudienceAssistant,
			"Audio clip (audio/wav, 24 kB): gait cadence recorded on the ward walk. For the assistant's reasoning only; never play it.",
			"okafor", okafor, 2*day, 0.8),
		rec("exercise", models.AudienceUser,
			"Ankle pumps every hour while awake; heel slides ten times, twice a day; keep hip flexion under 90 degrees.",
			"okafor", okafor, 1*day, 0.6),
		rec("exercise_clip", models.AudienceUser,
			"Audio clip (audio/wav, 12 kB): a slow spoken count to pace ten heel slides.",
			"okafor", okafor, 1*day, 0.55),
		withAudio(rec("gait_note", models.AudienceAssistant,
			"Gait cadence recorded on the ward walk (2.9 s): left and right steps at about two a second. For the assistant's reasoning only; never play it.",
			"okafor", okafor, 20*time.Hour, 0.8), models.AudioWAV, seedGaitNote),
		withAudio(rec("exercise_clip", models.AudienceUser,
			"A slow count from one to ten, to pace your heel slides.",
			"okafor", okafor, 20*time.Hour, 0.55), models.AudioMPEG, seedExerciseClip),
	}
}

// StagedRevision is the live demo revision, never seeded: it becomes
// weight_bearing v3 when fired during the demo.
func StagedRevision() PublishInput {
	return PublishInput{Patient: DemoPatient, Domain: "weight_bearing", Audience: models.AudienceUser,
		Value: "Full weight-bearing as tolerated.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.9}
}

// Seed writes the demo seed (P-15) — patient ray, eight facts, eleven
// versions, every time an offset before now — if and only if the database
// holds no version yet; seeded reports whether it did. The versions are
// chained by the same code as Publish, with WrittenAt = now − offset
// (truncated to ms) instead of the clock, in one transaction, with one
// audit row per version (via "seed", actor "seed").
//
// Seeding fires no notification (P-8): the seeded versions get Seq numbers
// but watchers are not woken; a caller that must not notify for the seed
// starts Watch from LastSeq() taken after Seed returns.
func Seed(ctx context.Context, s *Store, now time.Time) (seeded bool, err error) {
	return s.seed(ctx, now, demoRecords(now))
}

// SeedBench seeds the benchmark fixture: patient "bench" with two user
// facts (weight_bearing, exercise), if the database holds no version yet.
func SeedBench(ctx context.Context, s *Store, now time.Time) (seeded bool, err error) {
	return s.seed(ctx, now, []seedRecord{
		{ago: time.Hour, in: PublishInput{Patient: "bench", Domain: "weight_bearing", Audience: models.AudienceUser,
			Value: "Partial weight-bearing with the frame.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.9}},
		{ago: time.Hour, in: PublishInput{Patient: "bench", Domain: "exercise", Audience: models.AudienceUser,
			Value: "Ankle pumps every hour while awake.", AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.6}},
	})
}

func (s *Store) seed(ctx context.Context, now time.Time, recs []seedRecord) (bool, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM versions`).Scan(&n); err != nil {
		return false, fmt.Errorf("store: seed: %w", err)
	}
	if n > 0 {
		return false, nil
	}
	for _, r := range recs {
		pi, err := Validate(r.in)
		if err != nil {
			return false, fmt.Errorf("store: seed %s: %w", r.in.Domain, err)
		}
		v, _, err := s.appendVersion(ctx, tx, pi, now.Add(-r.ago))
		if err != nil {
			return false, fmt.Errorf("store: seed %s: %w", r.in.Domain, err)
		}
		if err := s.appendAudit(ctx, tx, AuditEntry{Actor: "seed", URI: v.URI().String(), Outcome: "accepted",
			Reason: ReasonOK, Via: "seed", Author: v.AuthorID}); err != nil {
			return false, err
		}
	}
	if err := s.commit(tx); err != nil {
		return false, fmt.Errorf("store: seed: commit: %w", err)
	}
	return true, nil
}

// Rekey re-seals every stored version's value with the current Sealer
// (after opening it with the Sealer, which may hold previous keys, or as
// plaintext), in one transaction. Hashes do not change: they are over
// plaintext. It returns how many versions were re-sealed. Rekey is the one
// path that reads plaintext rows in a sealed store (sealing a store for the
// first time); it logs how many it sealed, since in an already-sealed store
// such rows are forged — run verify before rekey. Errors: no Sealer
// configured, a value that fails to open, ErrSealerUnavailable (nothing is
// changed).
func (s *Store) Rekey(ctx context.Context) (int, error) {
	if s.sealer == nil {
		return 0, fmt.Errorf("store: rekey: %w", errNoSealer)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+versionCols+` FROM versions v JOIN facts f
		ON f.patient = v.patient AND f.domain = v.domain ORDER BY v.seq`)
	if err != nil {
		return 0, fmt.Errorf("store: rekey: %w", err)
	}
	var raws []row
	for rows.Next() {
		r, err := scanRaw(rows)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: rekey: %w", err)
		}
		raws = append(raws, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: rekey: %w", err)
	}
	plaintext := 0
	for _, r := range raws {
		if r.v.Value, err = s.openForRekey(ctx, r); err != nil {
			return 0, fmt.Errorf("store: rekey: %w", err)
		}
		if !r.sealed {
			plaintext++
		}
		if err := s.loadAudio(ctx, tx, &r, true); err != nil { // the clip, sealed with the value (audio_read.go)
			return 0, fmt.Errorf("store: rekey: %w", err)
		}
		if hashOf(r.v) != r.v.Hash {
			return 0, fmt.Errorf("store: rekey: %s: stored hash disagrees with the value; run verify", r.v.URI())
		}
		stored, sealed, err := s.seal(ctx, r.v)
		if err != nil {
			return 0, fmt.Errorf("store: rekey: %w", err)
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE versions SET value = ?, sealed = ? WHERE seq = ?`), stored, sqlBool(sealed), r.seq); err != nil {
			return 0, fmt.Errorf("store: rekey: %w", err)
		}
		if r.v.Audio != nil {
			clip, err := s.sealAudio(ctx, r.v, r.v.Audio.Data)
			if err != nil {
				return 0, fmt.Errorf("store: rekey: %w", err)
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE versions SET audio = ? WHERE seq = ?`), clip, r.seq); err != nil {
				return 0, fmt.Errorf("store: rekey: %w", err)
			}
		}
	}
	if err := s.commit(tx); err != nil {
		return 0, fmt.Errorf("store: rekey: commit: %w", err)
	}
	if plaintext > 0 {
		s.log.WarnContext(ctx, "store: rekey sealed versions that were stored as plaintext", "count", plaintext, "provider", s.sealer.Name())
	}
	return len(raws), nil
}
