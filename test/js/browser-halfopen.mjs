// Part 6 (a half-open event stream, finding V3): Debian's Chromium,
// headless, driven by playwright-core. The card is opened through a
// loopback TCP proxy (PROXY_PORT → the server) that, once frozen, stops
// forwarding bytes either way on the connection carrying the card's event
// stream while keeping its sockets open — a Wi-Fi stall or a NAT that
// dropped the connection without a FIN. A revision written then goes into
// the dead stream. The card must give the silent stream up, open it again
// and read its facts again before it says "Live": the new words show, with
// the old ones struck through (P-24). Before, it said "Live" over the old
// words for as long as the socket stayed half-open, and after re-opening
// the same session's stream it never read again. Within 20 s of the
// stream's last byte, before the stream is given up, the card stops saying
// "Live" and hides its instructions as out of date (it said "Live" for the
// whole 25 s).
//
// env: UNSAY_E2E_URL (the server), PROXY_PORT, CHROMIUM, TOKEN_READER, WRITE_SECRET.
import net from 'node:net';
import { chromium } from 'playwright-core';
import { step, done, env, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const target = new URL(base);
const proxyPort = Number(env('PROXY_PORT'));
const reader = env('TOKEN_READER');
const secret = env('WRITE_SECRET');
const OLD = 'Before the stall: walk with the frame, half your weight.';
const NEW = 'During the stall: full weight as tolerated, one stick.';

// The proxy: a connection that has carried "GET /mcp" is the stream's;
// freeze() makes those drop every byte both ways, sockets left open.
const conns = new Set();
const proxy = net.createServer((down) => {
  const up = net.connect(Number(target.port), target.hostname);
  const c = { down, up, stream: false, frozen: false };
  conns.add(c);
  down.on('data', (b) => {
    if (b.toString('latin1').startsWith('GET /mcp')) c.stream = true;
    if (!c.frozen) up.write(b);
  });
  up.on('data', (b) => { if (!c.frozen) down.write(b); });
  const end = () => { conns.delete(c); down.destroy(); up.destroy(); };
  down.on('error', end); up.on('error', end); down.on('close', end); up.on('close', end);
});
await new Promise((ok) => proxy.listen(proxyPort, '127.0.0.1', ok));
const freeze = () => { let n = 0; for (const c of conns) if (c.stream) { c.frozen = true; n++; } return n; };

const write = async (value) => {
  const r = await signedWrite(base, secret, { patient: 'ray', domain: 'weight_bearing', audience: 'user', value, authorId: 'okafor', authorLabel: 'Sarah Okafor, physio' });
  if (r.status !== 201 && r.status !== 200) throw new Error(`write: HTTP ${r.status} ${r.text}`);
};
await write(OLD);

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const p = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const status = async () => ((await p.locator('[data-testid="status"]').textContent()) || '').trim();
const walkingRow = () => p.locator('[data-testid="fact-row"][data-uri="care://ray/weight_bearing"]');

await step('echo.html through the proxy: the walking instruction, Live', async () => {
  await p.goto(`http://127.0.0.1:${proxyPort}/echo.html#token=${encodeURIComponent(reader)}`);
  await walkingRow().getByText(OLD).waitFor({ state: 'visible', timeout: 15000 });
  await p.waitForFunction(() => document.querySelector('[data-testid="status"]').textContent.trim() === 'Live', null, { timeout: 10000 });
});
let frozen = 0;
await step('the stream\'s connection is frozen and a revision goes into it', async () => {
  frozen = freeze();
  if (frozen === 0) return 'no connection carried the event stream';
  await write(NEW);
});
await step('within 20 s of the stream\'s last byte the card stops saying Live and hides its instructions as out of date', async () => {
  // The last byte came at most 15 s (the keep-alive) before the freeze.
  try { await p.locator('[data-testid="outdated"]').waitFor({ state: 'visible', timeout: 22000 }); } catch {
    return `22 s after the freeze the card shows no "out of date" notice; status ${JSON.stringify(await status())}`;
  }
  if ((await status()) === 'Live') return 'the out-of-date card still says Live';
  if (!(await p.locator('#card').evaluate((el) => el.classList.contains('outdated')))) return 'the card is not marked outdated';
});
await step('the card gives the silent stream up, reads again and shows the new words with the old struck through, then Live', async () => {
  try { await walkingRow().getByText(NEW).waitFor({ state: 'visible', timeout: 45000 }); } catch {
    return `45 s after the revision the row says ${JSON.stringify(await walkingRow().innerText())} under ${JSON.stringify(await status())}`;
  }
  const old = (await p.locator('[data-testid="retraction-old"]').textContent()) || '';
  if (!old.includes(OLD)) return 'retraction-old is ' + JSON.stringify(old);
  await p.waitForFunction(() => document.querySelector('[data-testid="status"]').textContent.trim() === 'Live', null, { timeout: 10000 });
});
await browser.close();
proxy.close();
for (const c of conns) { c.down.destroy(); c.up.destroy(); }
done();
