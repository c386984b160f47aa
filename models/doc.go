// Package models is Unsay's vocabulary: scopes, audiences, the one table that
// binds a URI scheme to its audience and read scope, care URIs, principals,
// fact versions, staleness, spoken ages and the retraction sentence.
//
// It does no I/O and imports only the standard library, so every other
// package — the store, the MCP server, the speech principal and the Alexa
// skill — can share it without depending on one another (DESIGN.md, Layout).
package models
