// Package speech is the speech principal (DESIGN.md, main job steps 2–4):
// an MCP client inside the Unsay process that holds a bearer token with
// care.read.user and nothing else, subscribes to every care:// fact of its
// linked patients (one subscriptions/listen stream on MCP 2026-07-28, or
// resources/subscribe on a 2025-11-25 session), and turns each revision into an announcement for Ray —
// a retraction of the version he actually heard, or a first hearing — kept
// in a durable heard ledger and announcement queue (P-19).
//
// The files, by job:
//
//	principal.go  the Principal, New, the errors
//	loop.go       Run: the one goroutine that owns the state and the session
//	state.go      the state it owns (patients, session, cache, work, lag)
//	upstream.go   how it reaches the server: 2026-07-28 when offered, else a
//	              2025-11-25 session (a remote legacy-only Unsay)
//	listen.go     the 2026-07-28 connection: one subscriptions/listen stream
//	sync.go       the session's worker: list, subscribe, read, reconcile
//	rule.go       decide: the P-19 rule, one pure function, over what he
//	              heard and what he may have heard
//	read.go       a resources/read decoded by the read contract (models)
//	confirm.go    Turn: every fact confirmed current at speak time and
//	              reconciled before it is said (P-24); Offered
//	speech.go     Facts, Pending, MarkHeard, MarkTold, WaitPending, AddPatient
//	hooks.go      OnQueued, SetSpeaking, Speaking (the speech lease, P-23)
//	readiness.go  Committed, State, Collectors (/readyz and /metrics)
//	ledger.go, baseline.go, migrations/  the heard ledger
//	delivery.go   the delivery log: when and how each version reached Ray
//	              (the clinician's timeline; Delivery, DeliveryChanges, Notified)
//
// It reaches facts only over MCP: it imports models, the MCP SDK,
// database/sql and the standard library, never store or bridge (P-18, a
// test runs go list -deps to hold it). The ledger tables (speech_heard:
// the version he last heard for certain; speech_offered_version: the one
// he may have heard, offered in a response whose delivery is unconfirmed;
// speech_announcements, speech_followed, speech_baseline; speech_delivery:
// when, where and how each version reached him; speech_offered is read
// once, by migration 004) hold only patient, URI, versions, state, times
// and device kinds — never clinical text, which is read back over MCP when
// it is spoken.
//
// The skill reads it through Turn, Offered, MarkHeard and MarkTold; bridge/app runs
// Run, feeds Committed from the store's change feed, and serves State and
// Collectors in /readyz and /metrics.
package speech
