// Package speech is the speech principal (DESIGN.md, main job steps 2–4):
// an MCP client inside the Unsay process that holds a bearer token with
// care.read.user and nothing else, subscribes to every care:// fact of its
// linked patients, and turns each revision into an announcement for Ray —
// a retraction of the version he actually heard, or a first hearing — kept
// in a durable heard ledger and announcement queue (P-19).
//
// It reaches facts only over MCP: it imports models, the MCP SDK,
// database/sql and the standard library, never store or bridge (P-18, a
// test runs go list -deps to hold it). The ledger tables (speech_heard,
// speech_announcements) hold only patient, URI, versions and state — never
// clinical text, which is read back over MCP when it is spoken.
//
// The skill reads it through Facts, Pending and MarkHeard; main runs Run
// and serves State and Collectors in /readyz and /metrics.
package speech
