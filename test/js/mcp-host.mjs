// Part 1: the official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned
// in package.json) as an MCP host against the running Unsay server.
//
// env: UNSAY_E2E_URL (server base URL), TOKEN_USER (care.read.user),
// TOKEN_DUAL (care.read.user + care.read.assistant), WRITE_SECRET.
//
// Two sessions: a dual-scoped host (sees care-internal://, positive twin)
// and a user-scoped host whose every received message is recorded and must
// never contain a care-internal:// URI or assistant-only words (P-1, P-9).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ResourceUpdatedNotificationSchema,
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import { createHash } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020.js';
import { check, step, done, env, signedWrite, leaked, waitFor } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const tokenUser = env('TOKEN_USER');
const tokenDual = env('TOKEN_DUAL');
const secret = env('WRITE_SECRET');
const REVISION = 'Full weight-bearing as tolerated.';

/** Connect a host with a bearer token; every message it receives is recorded. */
async function connect(token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(base + '/mcp'), {
    requestInit: { headers: { Authorization: 'Bearer ' + token } },
  });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  const received = [];
  const updated = [];
  const logs = [];
  const listChanged = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { listChanged.push(Date.now()); });
  await client.connect(transport);
  // Record every message the transport delivers (responses and notifications).
  const deliver = transport.onmessage;
  transport.onmessage = (msg, extra) => { received.push(msg); deliver?.call(transport, msg, extra); };
  return { client, transport, received, updated, logs, listChanged };
}

/** List every page; returns {uris, pages}. */
async function listAll(client) {
  const pages = [];
  let cursor;
  for (let i = 0; i < 50; i++) {
    const r = await client.listResources(cursor ? { cursor } : {});
    pages.push(r.resources.map((x) => x.uri));
    cursor = r.nextCursor;
    if (!cursor) break;
  }
  return { uris: pages.flat(), pages };
}

function textOf(read) {
  return (read.contents || []).map((c) => c.text || '').join('\n');
}

function metaOf(read) {
  return (read.contents && read.contents[0] && read.contents[0]._meta) || {};
}

async function expectCode(fn, code) {
  try {
    await fn();
  } catch (e) {
    if (e.code === code) return;
    return `expected JSON-RPC ${code}, got ${e.code}: ${e.message}`;
  }
  return `expected JSON-RPC ${code}, got a result`;
}

function validatorFor(schema) {
  const is2020 = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12');
  const ajv = is2020 ? new Ajv2020({ strict: false, allErrors: true }) : new Ajv({ strict: false, allErrors: true });
  return ajv.compile(schema);
}

const sinceHourAgo = () => new Date(Date.now() - 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');

// ---- dual-scoped host: the assistant's reasoning host -------------------
const dual = await connect(tokenDual, 'e2e-dual-host');

await step('dual: server instructions tell a host to call whats_changed and speak a retraction first', () => {
  const ins = dual.client.getInstructions() || '';
  if (!ins.includes('whats_changed')) return 'instructions do not mention whats_changed: ' + JSON.stringify(ins);
  if (!/retraction/i.test(ins)) return 'instructions do not mention retractions: ' + JSON.stringify(ins);
});

await step('dual: lists every page at 3 per page, in URI order, with care-internal:// and ui://unsay/echo', async () => {
  const { uris, pages } = await listAll(dual.client);
  if (pages.length < 2) return `expected several pages, got ${pages.length}: ${JSON.stringify(pages)}`;
  if (pages.some((p) => p.length > 3)) return 'a page holds more than 3: ' + JSON.stringify(pages);
  if (new Set(uris).size !== uris.length) return 'a URI is listed twice: ' + JSON.stringify(uris);
  const sorted = [...uris].sort();
  if (JSON.stringify(sorted) !== JSON.stringify(uris)) return 'not in URI order: ' + JSON.stringify(uris);
  for (const u of ['care://ray/weight_bearing', 'care://ray/anticoagulant', 'care-internal://ray/risk', 'ui://unsay/echo']) {
    if (!uris.includes(u)) return `${u} missing from ${JSON.stringify(uris)}`;
  }
});

await step('dual: a cursor the server did not issue is -32602', () =>
  expectCode(() => dual.client.listResources({ cursor: 'bm90LWEtY3Vyc29y' }), -32602));

await step('dual: reads care-internal://ray/risk', async () => {
  const r = await dual.client.readResource({ uri: 'care-internal://ray/risk' });
  if (!textOf(r)) return 'empty text';
});

// ---- user-scoped host: what Ray's side may see --------------------------
const user = await connect(tokenUser, 'e2e-user-host');

await step('user: lists every page at 3 per page, with no care-internal:// URI', async () => {
  const { uris, pages } = await listAll(user.client);
  if (pages.some((p) => p.length > 3)) return 'a page holds more than 3: ' + JSON.stringify(pages);
  if (uris.some((u) => u.startsWith('care-internal://'))) return 'care-internal URI listed: ' + JSON.stringify(uris);
  if (!uris.includes('care://ray/weight_bearing')) return 'care://ray/weight_bearing missing: ' + JSON.stringify(uris);
});

await step('user: care-internal://ray/risk reads as -32002, the same as an absent fact', async () => {
  const a = await expectCode(() => user.client.readResource({ uri: 'care-internal://ray/risk' }), -32002);
  if (a) return a;
  return expectCode(() => user.client.readResource({ uri: 'care://ray/no_such_domain' }), -32002);
});

await step('user: the stale anticoagulant fact starts with the [STALE header', async () => {
  const r = await user.client.readResource({ uri: 'care://ray/anticoagulant' });
  const t = textOf(r);
  if (!t.startsWith('[STALE')) return 'text does not start with [STALE: ' + JSON.stringify(t.slice(0, 120));
  if (metaOf(r)['unsay/stale'] !== true) return '_meta["unsay/stale"] is not true: ' + JSON.stringify(metaOf(r));
});

// ---- audio facts: blob resources under the same partition ---------------
// MPEG audio frame header: 11 sync bits, version, layer (ISO 11172-3 §2.4.2.3).
function mp3Header(b, i) {
  const h = ((b[i] << 24) | (b[i + 1] << 16) | (b[i + 2] << 8) | b[i + 3]) >>> 0;
  return { sync: h >>> 21 === 0x7ff, version: (h >>> 19) & 3, layer: (h >>> 17) & 3, bitrate: (h >>> 12) & 15, rate: (h >>> 10) & 3 };
}

await step('user: care://ray/exercise_clip reads as its text, then a blob with mimeType audio/mpeg (MPEG-2 Layer III, 48 kbps)', async () => {
  const r = await user.client.readResource({ uri: 'care://ray/exercise_clip' });
  const text = r.contents.find((c) => typeof c.text === 'string');
  const blob = r.contents.find((c) => typeof c.blob === 'string');
  if (!text || !blob) return 'want a text and a blob contents: ' + JSON.stringify(r.contents.map((c) => Object.keys(c)));
  if (blob.uri !== 'care://ray/exercise_clip' || blob.mimeType !== 'audio/mpeg') return `blob ${blob.uri} ${blob.mimeType}`;
  const bytes = Buffer.from(blob.blob, 'base64');
  const h = mp3Header(bytes, 0);
  // version 2 = MPEG-2, layer 1 = Layer III, bit rate index 6 = 48 kbps, rate index 1 = 24000 Hz
  if (!h.sync || h.version !== 2 || h.layer !== 1 || h.bitrate !== 6 || h.rate !== 1) return 'first frame header ' + JSON.stringify(h);
  if (blob._meta['unsay/versionHash'] !== text._meta['unsay/versionHash']) return 'blob and text name different versions';
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (blob._meta['unsay/audioSha256'] !== sha) return 'unsay/audioSha256 is not the SHA-256 of the blob';
  if (!String(blob._meta['unsay/audioUrl'] || '').includes('/audio/')) return 'no signed clip URL on the speakable blob';
});

await step('user: the listing gives the clip its mimeType and its size in bytes', async () => {
  let r, cursor;
  for (let i = 0; i < 50 && !r; i++) {
    const page = await user.client.listResources(cursor ? { cursor } : {});
    r = page.resources.find((x) => x.uri === 'care://ray/exercise_clip');
    if (!(cursor = page.nextCursor)) break;
  }
  if (!r || r.mimeType !== 'audio/mpeg' || !(r.size > 40000)) return 'listing entry ' + JSON.stringify(r);
});

await step('user: care-internal://ray/gait_note (an assistant-only clip) reads as -32002, like an absent fact', async () => {
  const a = await expectCode(() => user.client.readResource({ uri: 'care-internal://ray/gait_note' }), -32002);
  if (a) return a;
  return expectCode(() => user.client.readResource({ uri: 'care://ray/gait_note' }), -32002);
});

await step('dual: reads care-internal://ray/gait_note as a WAV blob (RIFF/WAVE) with no clip URL (positive twin)', async () => {
  const r = await dual.client.readResource({ uri: 'care-internal://ray/gait_note' });
  const blob = r.contents.find((c) => typeof c.blob === 'string');
  if (!blob || blob.mimeType !== 'audio/wav') return 'no audio/wav blob: ' + JSON.stringify(r.contents.map((c) => c.mimeType));
  const b = Buffer.from(blob.blob, 'base64');
  if (b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') return 'not RIFF/WAVE';
  if ('unsay/audioUrl' in blob._meta) return 'an assistant-only clip has a URL';
});

let before;
await step('user: reads care://ray/weight_bearing with its version in _meta', async () => {
  before = await user.client.readResource({ uri: 'care://ray/weight_bearing' });
  const m = metaOf(before);
  if (!(m['unsay/version'] >= 1)) return '_meta["unsay/version"] missing: ' + JSON.stringify(m);
  if (!m['unsay/versionHash']) return '_meta["unsay/versionHash"] missing';
});

await step('user: subscribes to care://ray/weight_bearing', async () => {
  await user.client.setLoggingLevel('debug');
  await user.client.subscribeResource({ uri: 'care://ray/weight_bearing' });
});

await step('dual: subscribes to care-internal://ray/risk', async () => {
  await dual.client.setLoggingLevel('debug');
  await dual.client.subscribeResource({ uri: 'care-internal://ray/risk' });
});

let write;
await step('a signed write of care://ray/weight_bearing answers 201 with the next version', async () => {
  write = await signedWrite(base, secret, {
    patient: 'ray', domain: 'weight_bearing', audience: 'user', value: REVISION,
    authorId: 'okafor', authorLabel: 'Sarah Okafor, physio',
  });
  if (write.status !== 201) return `HTTP ${write.status}: ${write.text}`;
  const was = metaOf(before)['unsay/version'];
  if (write.json.version !== was + 1) return `version ${write.json.version}, expected ${was + 1}`;
});

await step('user: receives notifications/resources/updated for care://ray/weight_bearing', () =>
  waitFor(() => user.updated.includes('care://ray/weight_bearing'), 5000, 'updated'));

await step('user: the re-read carries the new value and _meta["unsay/retraction"] withdrawing the version it read', async () => {
  const r = await user.client.readResource({ uri: 'care://ray/weight_bearing' });
  const t = textOf(r);
  const m = metaOf(r);
  if (!t.includes(REVISION)) return 'new value missing: ' + JSON.stringify(t);
  const ret = m['unsay/retraction'];
  if (typeof ret !== 'string' || !ret) return '_meta["unsay/retraction"] missing: ' + JSON.stringify(m);
  const old = textOf(before).trim();
  if (!ret.includes(old.replace(/[.]$/, ''))) return 'retraction does not name the withdrawn sentence ' + JSON.stringify(old) + ': ' + ret;
  if (!ret.includes('Sarah Okafor')) return 'retraction does not name the author: ' + ret;
  if (!/^stop/i.test(ret.trim())) return 'retraction does not open with stop: ' + ret;
});

let riskWrite;
await step('a signed write of care-internal://ray/risk (assistant audience) answers 201', async () => {
  riskWrite = await signedWrite(base, secret, {
    patient: 'ray', domain: 'risk', audience: 'assistant', value: 'Fall risk reviewed: still HIGH (e2e).',
    authorId: 'adeyemi', authorLabel: 'Mr Adeyemi, surgical team',
  });
  if (riskWrite.status !== 201) return `HTTP ${riskWrite.status}: ${riskWrite.text}`;
});

await step('dual: receives updated for care-internal://ray/risk (positive twin)', () =>
  waitFor(() => dual.updated.includes('care-internal://ray/risk'), 5000, 'updated for risk'));

await step('dual: gets a log notice per revision with the URI and no value', async () => {
  await waitFor(() => dual.logs.length > 0, 5000, 'a notifications/message');
  const s = JSON.stringify(dual.logs);
  if (s.includes(REVISION)) return 'a log notice carries the value: ' + s;
});

let tools;
await step('user: whats_changed is listed with an outputSchema', async () => {
  tools = (await user.client.listTools()).tools;
  const t = tools.find((x) => x.name === 'whats_changed');
  if (!t) return 'no whats_changed tool in ' + JSON.stringify(tools.map((x) => x.name));
  if (!t.outputSchema) return 'whats_changed has no outputSchema';
});

await step('user: whats_changed structuredContent validates against its outputSchema and holds the revision', async () => {
  const schema = tools.find((x) => x.name === 'whats_changed').outputSchema;
  const r = await user.client.callTool({ name: 'whats_changed', arguments: { since: sinceHourAgo() } });
  if (r.isError) return 'isError: ' + JSON.stringify(r.content);
  const validate = validatorFor(schema);
  if (!validate(r.structuredContent)) return 'schema errors: ' + JSON.stringify(validate.errors) + ' in ' + JSON.stringify(r.structuredContent);
  const s = JSON.stringify(r.structuredContent);
  if (!s.includes('care://ray/weight_bearing') || !s.includes(REVISION)) return 'the revision is missing: ' + s;
  if (leaked(s)) return 'assistant-only content in whats_changed: ' + leaked(s);
});

await step('dual: whats_changed includes the care-internal revision (positive twin)', async () => {
  const r = await dual.client.callTool({ name: 'whats_changed', arguments: { since: sinceHourAgo() } });
  const s = JSON.stringify(r.structuredContent);
  if (!s.includes('care-internal://ray/risk')) return 'risk revision missing: ' + s;
});

await step('user: whats_changed with a malformed since is a tool error, not a protocol error', async () => {
  const r = await user.client.callTool({ name: 'whats_changed', arguments: { since: 'yesterday-ish' } });
  if (!r.isError) return 'expected isError: true, got ' + JSON.stringify(r);
});

await step('user: brief_carer is built from speakable facts only, with the new walking instruction', async () => {
  const p = await user.client.getPrompt({ name: 'brief_carer', arguments: { patient: 'ray' } });
  const s = JSON.stringify(p.messages);
  if (!s.includes(REVISION)) return 'brief lacks the current walking instruction: ' + s.slice(0, 400);
  if (leaked(s)) return 'assistant-only content in brief_carer: ' + leaked(s);
});

await step('dual: brief_carer holds no assistant-only content even for a dual-scoped caller (P-10)', async () => {
  const p = await dual.client.getPrompt({ name: 'brief_carer', arguments: { patient: 'ray' } });
  const s = JSON.stringify(p.messages);
  if (leaked(s)) return 'assistant-only content in brief_carer: ' + leaked(s);
});

await step('dual: ui://unsay/echo reads as an MCP App with no assistant content', async () => {
  const r = await dual.client.readResource({ uri: 'ui://unsay/echo' });
  const c = r.contents[0];
  if (!String(c.mimeType).startsWith('text/html')) return 'mimeType ' + c.mimeType;
  if (leaked(c.text || '')) return 'assistant-only content in the card: ' + leaked(c.text);
});

// Give late notifications a moment, then audit everything the user host received.
await new Promise((r) => setTimeout(r, 300));
check('user: received messages recorded', user.received.length > 5, `only ${user.received.length} messages`);
{
  // The refusal probes above asked for care-internal://ray/risk and gait_note; their -32002
  // errors echo the asked-for string (P-2: data.uri is what was asked), which
  // is not a leak. Everything else must be clean.
  const asked = new Set(['care-internal://ray/risk', 'care-internal://ray/gait_note']);
  const audited = user.received.filter((m) => !(m.error && m.error.data && asked.has(m.error.data.uri)));
  const hits = audited.map((m) => JSON.stringify(m)).filter((s) => leaked(s));
  check('user: nothing received mentions a care-internal:// URI or assistant-only text', hits.length === 0,
    `found ${JSON.stringify(leaked(hits[0] || ''))} in: ${(hits[0] || '').slice(0, 600)}`);
  check('user: no updated for the assistant-only revision', !user.updated.some((u) => u.startsWith('care-internal://')),
    JSON.stringify(user.updated));
}
{
  const all = JSON.stringify(dual.received);
  check('dual: received assistant content (the audit above can fail)', all.includes('care-internal://'),
    'the dual host never saw a care-internal:// URI');
}

await user.client.close();
await dual.client.close();
done();
