// Shared helpers for the whole-program Node scripts. Each script reports its
// checks as lines "CHECK {name, ok, detail}" on stdout; the Go harness
// (test/e2e_test.go) turns each into a subtest. Nothing here knows Unsay's
// internals: only its HTTP surface.
import { createHmac } from 'node:crypto';

let failures = 0;

/** Report one check. */
export function check(name, ok, detail = '') {
  if (!ok) failures++;
  process.stdout.write('CHECK ' + JSON.stringify({ name, ok: !!ok, detail: ok ? '' : String(detail) }) + '\n');
  return !!ok;
}

/** Report a skipped check with its reason. */
export function skip(name, reason) {
  process.stdout.write('CHECK ' + JSON.stringify({ name, ok: true, skip: true, detail: reason }) + '\n');
}

/** Run fn as one check: it passes unless it throws (or returns a string, the failure detail). */
export async function step(name, fn) {
  try {
    const r = await fn();
    return check(name, typeof r !== 'string', r);
  } catch (e) {
    return check(name, false, (e && e.stack) || String(e));
  }
}

/** Exit with 1 when any check failed. */
export function done() {
  process.exit(failures ? 1 : 0);
}

/** Required environment variable. */
export function env(name) {
  const v = process.env[name];
  if (!v) {
    check('environment ' + name, false, name + ' is not set');
    done();
  }
  return v;
}

/** Sign and POST a clinician's write: HMAC-SHA256 over "{ts}." + body (P-12). */
export async function signedWrite(base, secret, fields) {
  const body = JSON.stringify(fields);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', secret).update(ts + '.' + body).digest('hex');
  const res = await fetch(base + '/write', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Unsay-Timestamp': ts, 'X-Unsay-Signature': 'v1=' + sig },
    body,
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, json, text };
}

/** Words from the seed's assistant-only records; never for Ray or a user-scoped client. */
export const ASSISTANT_ONLY = ['fall risk', 'adherence', 'disputes', 'over-reports', 'lives alone', 'gait cadence'];

/** A care-internal:// URI naming a patient (the scheme alone, in documentation text, is no leak). */
const INTERNAL_URI = /care-internal:\/\/[a-z0-9_.-]+/i;

/** The first assistant-only phrase or care-internal URI found in s (case-insensitive), or ''. */
export function leaked(s) {
  const str = String(s);
  const m = str.match(INTERNAL_URI);
  if (m) return m[0];
  const l = str.toLowerCase();
  return ASSISTANT_ONLY.find((p) => l.includes(p)) || '';
}

/** Resolve when pred() is true, polling every 20 ms; reject after ms. */
export async function waitFor(pred, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('timed out after ' + ms + ' ms waiting for ' + what);
}
