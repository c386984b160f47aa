// Package speech is the speech principal (README, Architecture):
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
//	read.go       a resources/read decoded by the read contract (models)
//	confirm.go    Turn: every fact confirmed current at speak time and
//	              reconciled before it is said (P-24); Offered
//	speech.go     Facts, Pending, MarkHeard, MarkTold, WaitPending, AddPatient
//	hooks.go      OnQueued: the out-of-session notice of a queued announcement
//	speaker.go    who speaks for the patient: SpeaksFor, the speaker lease
//	              competition (Config.Compete, P-23)
//	readiness.go  Committed, State, Collectors (/readyz and /metrics)
//	ledger.go     LedgerStore: the durable heard ledger it needs, and the
//	              principal's handle on it (its clock on every write)
//	delivery.go   the delivery log: when and how each version reached Ray
//	              (the clinician's timeline; Delivery, DeliveryChanges, Notified)
//	ledgertest/   the ledger's contract as one suite, run on the store's SQL
//	              and on this package's in-memory test ledger
//
// It reaches facts only over MCP: it imports models, the MCP SDK and the
// standard library, never store or bridge (P-18, a test runs go list -deps
// to hold it). The heard ledger is a LedgerStore the caller hands it
// (Config.Ledger; bridge/app hands it store.HeardLedger, whose tables,
// store migration 040, live in the store's database). It applies the P-19
// rule (models.Decide) inside the transaction that read its inputs and
// holds only patient, URI, versions, state, times and device kinds — never
// clinical text, which is read back over MCP when it is spoken.
//
// The skill reads it through Turn, Offered, MarkHeard and MarkTold; bridge/app runs
// Run, feeds Committed from the store's change feed, and serves State and
// Collectors in /readyz and /metrics.
package speech
