// Package bridge is Unsay's MCP server and its HTTP surface.
//
// /mcp serves both eras of MCP (modern.go, listen.go): a request carrying
// 2026-07-28 (header or per-request _meta) and every server/discover goes
// to a second *mcp.Server behind the SDK's stateless handler —
// authorization per request, subscriptions/listen streams narrowed to what
// the token may read and re-authorized at send time, -32602 for any
// resource it cannot read (SEP-2164), retractions from the client's
// unsay/lastReadVersion; everything else (initialize, Mcp-Session-Id) goes
// to one *mcp.Server (github.com/modelcontextprotocol/go-sdk v1.8.0) over
// stateful Streamable HTTP, protocol 2025-11-25. Both expose every care
// fact the caller's principal may read as a resource, plus the device card
// ui://unsay/echo (P-16), the MCP Apps view of both tools; the tools
// whats_changed and care_instruction (tools_alexaplus.go: shaped for
// Alexa+, withdrawal first, the whole answer in the text block for a
// 2025-03-26 host); the prompt brief_carer (P-10); resources/updated and
// resources/list_changed driven by the store's change feed (P-8, P-9). The
// stateful path adds notifications/message and a resumable event store
// that re-authorizes every replayed frame (P-2, P-9).
//
// On the stateful path the SDK's defaults are wrong for Unsay in several
// places, so this package replaces them in receiving and sending
// middleware:
//
//   - resources/list pages at 3 over URI order with a MAC'd key cursor; a
//     cursor this server did not issue is -32602 (P-11);
//   - resources/read answers every failure with -32002 "Resource not found:
//     {uri}" and data {"uri": …}, identical in shape whatever the cause (P-2);
//   - the principal of a request is read from req.Extra.TokenInfo, never from
//     the handler's context (which holds the initialize request's token);
//   - resources/updated, list_changed and revision logs are re-authorized per
//     session at send time against the session's principal and the
//     principal of the request that opened its stream (P-9), and withheld
//     altogether while the session's latest token has expired;
//   - a session is bound to its creator's full principal — subject,
//     patients and scopes (principalKey): any other token is refused 403 on
//     POST, GET and DELETE before the SDK runs, whose own subject-and-
//     patients check (TokenInfo.UserID = auth.SessionUserID) stays behind
//     it (P-21); one principal holds at most MaxSessionsPerPrincipal, a
//     newer initialize ending its least-recently-used idle session;
//   - every response is written through a StreamWriter (stream.go): a
//     bounded queue drained by its own goroutine, each write under a
//     deadline, so no client delays another; a standalone stream that
//     cannot keep up closes its session (P-25). The SDK's ResourceUpdated
//     still visits sessions one after another (go-sdk #1265); each visit
//     now only queues;
//   - the event store is the bridge's own (eventLog): a Last-Event-ID past
//     the end is refused, and a GET without one resumes after the last
//     event delivered; keep-alive pings are the bridge's own too, sent only
//     to sessions with a stream attached;
//   - the SDK's log records are demoted from INFO to DEBUG with session ids
//     hashed (sessionRef), and repetitive lines are rate-limited;
//   - Close returns within CloseTimeout: server→client requests (keepalive
//     pings) still waiting for an answer are cancelled, not waited out, and
//     /mcp answers 503 from its start.
//
// The router (chi) sets X-Content-Type-Options: nosniff and checks Host and
// Origin before anything runs (probes answer by address), puts the
// bearer-token middleware of package bridge/auth in front of /mcp, and
// serves the routes of bridge/httpapi, /healthz and a /readyz that says
// only ready / not ready and why. AdminHandler, for an operators-only
// listen address, serves the readiness details and /metrics (Prometheus,
// names prefixed unsay_).
package bridge
