// Part 1 (2026-07-28): the official MCP TypeScript SDK v2 client
// (@modelcontextprotocol/client, pinned in package.json) as an MCP host on
// the current protocol revision — stateless, per-request _meta,
// server/discover, subscriptions/listen — against the running Unsay server.
//
// env: UNSAY_E2E_URL (server base URL), TOKEN_USER (care.read.user),
// TOKEN_DUAL (care.read.user + care.read.assistant), WRITE_SECRET.
//
// The main job: discover, list every page at 3, read with the [STALE
// header, listen on a care:// fact, a signed write → the tagged
// resources/updated → the re-read naming the version read before
// (_meta "unsay/lastReadVersion") carries the retraction. A user-scoped
// client's listen never acknowledges a care-internal:// URI and nothing it
// receives names one (P-1, P-2, P-9); a dual-scoped one does (the twin).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import { check, step, done, env, signedWrite, leaked, waitFor } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const tokenUser = env('TOKEN_USER');
const tokenDual = env('TOKEN_DUAL');
const secret = env('WRITE_SECRET');
const MODERN = '2026-07-28';
const REVISION = 'Full weight-bearing as tolerated (2026 host).';
const SUB_ID = 'io.modelcontextprotocol/subscriptionId';

/** Connect a host pinned to 2026-07-28; every message it receives is recorded. */
async function connect(token, name) {
  const transport = new StreamableHTTPClientTransport(new URL(base + '/mcp'), {
    requestInit: { headers: { Authorization: 'Bearer ' + token } },
  });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {}, versionNegotiation: { mode: { pin: MODERN } } });
  const received = [];
  const updated = [];
  client.setNotificationHandler('notifications/resources/updated', (n) => { updated.push(n.params.uri); });
  await client.connect(transport);
  const deliver = transport.onmessage;
  transport.onmessage = (msg, extra) => { received.push(msg); deliver?.call(transport, msg, extra); };
  return { client, transport, received, updated };
}

/**
 * List every resource. Without a cursor the v2 client walks every page
 * itself and returns the aggregate; the pages the server sent are read
 * back from the recorded raw responses.
 */
async function listAll(host) {
  const from = host.received.length;
  const r = await host.client.listResources(undefined, { cacheMode: 'bypass' });
  const frames = host.received.slice(from).filter((m) => m.result && Array.isArray(m.result.resources));
  const pages = frames.map((m) => m.result.resources.map((x) => x.uri));
  const scopes = [...new Set(frames.map((m) => m.result.cacheScope))];
  return { uris: r.resources.map((x) => x.uri), pages, scopes };
}

const textOf = (read) => (read.contents || []).map((c) => c.text || '').join('\n');
const metaOf = (read) => (read.contents && read.contents[0] && read.contents[0]._meta) || {};

async function expectCode(fn, codes) {
  try {
    await fn();
  } catch (e) {
    if (codes.includes(e.code)) return;
    return `expected JSON-RPC ${codes.join(' or ')}, got ${e.code}: ${e.message}`;
  }
  return `expected JSON-RPC ${codes.join(' or ')}, got a result`;
}

function validatorFor(schema) {
  const is2020 = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12');
  const ajv = is2020 ? new Ajv2020({ strict: false, allErrors: true }) : new Ajv({ strict: false, allErrors: true });
  return ajv.compile(schema);
}

const sinceHourAgo = () => new Date(Date.now() - 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');

// ---- both hosts, pinned to 2026-07-28 ----------------------------------
const user = await connect(tokenUser, 'e2e-user-host-2026');
const dual = await connect(tokenDual, 'e2e-dual-host-2026');

await step('user: negotiates 2026-07-28 (modern era) with no session', () => {
  const v = user.client.getNegotiatedProtocolVersion();
  if (v !== MODERN) return `negotiated ${v}`;
  if (user.client.getProtocolEra() !== 'modern') return 'era ' + user.client.getProtocolEra();
  if (user.transport.sessionId) return 'the transport holds a session id: ' + user.transport.sessionId;
});

await step('user: server/discover lists 2026-07-28 and 2025-11-25, and instructions name both retraction paths', async () => {
  const d = await user.client.discover();
  for (const v of [MODERN, '2025-11-25']) {
    if (!d.supportedVersions.includes(v)) return `${v} missing from ${JSON.stringify(d.supportedVersions)}`;
  }
  const ins = d.instructions || '';
  for (const w of ['whats_changed', 'unsay/lastReadVersion', 'previousValue']) {
    if (!ins.includes(w)) return `instructions do not mention ${w}`;
  }
  if (!d.capabilities?.resources?.subscribe) return 'resources.subscribe not advertised: ' + JSON.stringify(d.capabilities);
});

await step('user: lists every page at 3, in URI order, private, with no care-internal:// URI', async () => {
  const { uris, pages, scopes } = await listAll(user);
  if (pages.length < 2 || pages.some((p) => p.length > 3)) return 'pages ' + JSON.stringify(pages);
  if (JSON.stringify(pages.flat()) !== JSON.stringify(uris)) return `the pages ${JSON.stringify(pages)} are not the list ${JSON.stringify(uris)}`;
  if (JSON.stringify([...uris].sort()) !== JSON.stringify(uris)) return 'not in URI order: ' + JSON.stringify(uris);
  if (uris.some((u) => u.startsWith('care-internal://'))) return 'care-internal URI listed: ' + JSON.stringify(uris);
  if (!uris.includes('care://ray/weight_bearing') || !uris.includes('ui://unsay/echo')) return 'missing entries: ' + JSON.stringify(uris);
  if (JSON.stringify(scopes) !== '["private"]') return 'cacheScope ' + JSON.stringify(scopes);
});

await step('dual: lists care-internal://ray/risk (positive twin)', async () => {
  const { uris } = await listAll(dual);
  if (!uris.includes('care-internal://ray/risk')) return 'risk missing: ' + JSON.stringify(uris);
});

await step('user: care-internal://ray/risk reads as -32602, the same as an absent fact (SEP-2164, P-2)', async () => {
  const a = await expectCode(() => user.client.readResource({ uri: 'care-internal://ray/risk' }, { cacheMode: 'bypass' }), [-32602]);
  if (a) return a;
  return expectCode(() => user.client.readResource({ uri: 'care://ray/no_such_domain' }, { cacheMode: 'bypass' }), [-32602]);
});

await step('user: the stale anticoagulant fact starts with the [STALE header', async () => {
  const r = await user.client.readResource({ uri: 'care://ray/anticoagulant' }, { cacheMode: 'bypass' });
  if (!textOf(r).startsWith('[STALE')) return 'text: ' + JSON.stringify(textOf(r).slice(0, 120));
  if (metaOf(r)['unsay/stale'] !== true) return '_meta: ' + JSON.stringify(metaOf(r));
});

let before;
await step('user: reads care://ray/weight_bearing with its version in _meta', async () => {
  before = await user.client.readResource({ uri: 'care://ray/weight_bearing' }, { cacheMode: 'bypass' });
  if (!(metaOf(before)['unsay/version'] >= 1)) return '_meta: ' + JSON.stringify(metaOf(before));
});

let userSub;
await step('user: subscriptions/listen on care://ray/weight_bearing and care-internal://ray/risk acknowledges only the care:// fact', async () => {
  userSub = await user.client.listen({ resourceSubscriptions: ['care://ray/weight_bearing', 'care-internal://ray/risk'] });
  const honored = userSub.honoredFilter.resourceSubscriptions || [];
  if (JSON.stringify(honored) !== JSON.stringify(['care://ray/weight_bearing'])) return 'acknowledged ' + JSON.stringify(userSub.honoredFilter);
});

let dualSub;
await step('dual: subscriptions/listen acknowledges care-internal://ray/risk (positive twin)', async () => {
  dualSub = await dual.client.listen({ resourceSubscriptions: ['care-internal://ray/risk'] });
  if (!(dualSub.honoredFilter.resourceSubscriptions || []).includes('care-internal://ray/risk')) return JSON.stringify(dualSub.honoredFilter);
});

let write;
await step('a signed write of care://ray/weight_bearing answers 201 with the next version', async () => {
  write = await signedWrite(base, secret, {
    patient: 'ray', domain: 'weight_bearing', audience: 'user', value: REVISION,
    authorId: 'okafor', authorLabel: 'Sarah Okafor, physio',
  });
  if (write.status !== 201) return `HTTP ${write.status}: ${write.text}`;
  if (write.json.version !== metaOf(before)['unsay/version'] + 1) return 'version ' + write.json.version;
});

await step('user: receives notifications/resources/updated for care://ray/weight_bearing, tagged with its listen', async () => {
  await waitFor(() => user.updated.includes('care://ray/weight_bearing'), 5000, 'updated');
  const raw = user.received.find((m) => m.method === 'notifications/resources/updated' && m.params?.uri === 'care://ray/weight_bearing');
  if (!raw) return 'the raw frame was not recorded';
  if (raw.params._meta?.[SUB_ID] === undefined) return 'no subscriptionId: ' + JSON.stringify(raw);
  const ack = user.received.find((m) => m.method === 'notifications/subscriptions/acknowledged');
  if (ack && JSON.stringify(ack.params._meta?.[SUB_ID]) !== JSON.stringify(raw.params._meta[SUB_ID])) {
    return `the updated is tagged ${JSON.stringify(raw.params._meta[SUB_ID])}, its listen ${JSON.stringify(ack.params._meta?.[SUB_ID])}`;
  }
});

await step('user: a re-read naming the version it read (_meta unsay/lastReadVersion) carries the retraction', async () => {
  const was = metaOf(before)['unsay/version'];
  const r = await user.client.readResource({ uri: 'care://ray/weight_bearing', _meta: { 'unsay/lastReadVersion': was } }, { cacheMode: 'bypass' });
  if (!textOf(r).includes(REVISION)) return 'new value missing: ' + JSON.stringify(textOf(r));
  const ret = metaOf(r)['unsay/retraction'];
  if (typeof ret !== 'string' || !ret) return '_meta["unsay/retraction"] missing: ' + JSON.stringify(metaOf(r));
  const old = textOf(before).trim().replace(/[.]$/, '');
  if (!ret.includes(old)) return 'retraction does not name the withdrawn sentence ' + JSON.stringify(old) + ': ' + ret;
  if (!ret.includes('Sarah Okafor') || !/^stop/i.test(ret.trim())) return 'retraction: ' + ret;
});

await step('a signed write of care-internal://ray/risk reaches the dual host only', async () => {
  const w = await signedWrite(base, secret, {
    patient: 'ray', domain: 'risk', audience: 'assistant', value: 'Fall risk reviewed: still HIGH (2026 e2e).',
    authorId: 'adeyemi', authorLabel: 'Mr Adeyemi, surgical team',
  });
  if (w.status !== 201) return `HTTP ${w.status}: ${w.text}`;
  await waitFor(() => dual.updated.includes('care-internal://ray/risk'), 5000, 'updated for risk on the dual host');
});

let tools;
await step('user: whats_changed structuredContent validates against its outputSchema, with previousValue and the retraction', async () => {
  tools = (await user.client.listTools()).tools;
  const t = tools.find((x) => x.name === 'whats_changed');
  if (!t?.outputSchema) return 'no whats_changed with an outputSchema';
  const r = await user.client.callTool({ name: 'whats_changed', arguments: { since: sinceHourAgo() } });
  if (r.isError) return 'isError: ' + JSON.stringify(r.content);
  const validate = validatorFor(t.outputSchema);
  if (!validate(r.structuredContent)) return 'schema errors: ' + JSON.stringify(validate.errors);
  const c = (r.structuredContent.changes || []).find((x) => x.uri === 'care://ray/weight_bearing' && x.value.includes(REVISION));
  if (!c) return 'the revision is missing: ' + JSON.stringify(r.structuredContent);
  if (!c.previousValue || !c.retraction) return 'previousValue or retraction missing: ' + JSON.stringify(c);
  if (leaked(JSON.stringify(r.structuredContent))) return 'assistant-only content: ' + leaked(JSON.stringify(r.structuredContent));
});

await step('user: brief_carer holds the new walking instruction and nothing assistant-only', async () => {
  const p = await user.client.getPrompt({ name: 'brief_carer', arguments: { patient: 'ray' } });
  const s = JSON.stringify(p.messages);
  if (!s.includes(REVISION)) return 'brief lacks the current walking instruction';
  if (leaked(s)) return 'assistant-only content: ' + leaked(s);
});

await step('closing the listens ends them locally', async () => {
  await userSub.close();
  await dualSub.close();
  const [a, b] = await Promise.all([userSub.closed, dualSub.closed]);
  if (a !== 'local' || b !== 'local') return `closed ${a}, ${b}`;
});

await new Promise((r) => setTimeout(r, 300));
check('user: received messages recorded', user.received.length > 5, `only ${user.received.length} messages`);
{
  // The refusal probe asked for care-internal://ray/risk; its -32602 error
  // echoes the asked-for string (P-2), and so does nothing else.
  const asked = new Set(['care-internal://ray/risk']);
  const audited = user.received.filter((m) => !(m.error && m.error.data && asked.has(m.error.data.uri)));
  const hits = audited.map((m) => JSON.stringify(m)).filter((s) => leaked(s));
  check('user: nothing received mentions a care-internal:// URI or assistant-only text', hits.length === 0,
    `found ${JSON.stringify(leaked(hits[0] || ''))} in: ${(hits[0] || '').slice(0, 600)}`);
  check('user: no updated for the assistant-only revision', !user.updated.some((u) => u.startsWith('care-internal://')), JSON.stringify(user.updated));
}
check('dual: received assistant content (the audit above can fail)', JSON.stringify(dual.received).includes('care-internal://'),
  'the dual host never saw a care-internal:// URI');

await user.client.close();
await dual.client.close();
done();
