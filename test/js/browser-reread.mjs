// Part 6 (a re-read that fails, finding U7): Debian's Chromium, headless,
// driven by playwright-core. The Echo Show card learns of a revision from
// its event stream and re-reads the fact; when that read fails (a Wi-Fi
// blip, a proxy, a restart) the card must not keep the superseded words on
// screen as current under "Live" (P-24). Its row says the instruction has
// just changed and the card can't show the new words yet, "Live" is not
// said, and the read is tried again until the new words show — with the
// old ones struck through as withdrawn. The twin: a revision whose re-read
// works shows at once and the card says "Live".
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_READER (care.read.user), WRITE_SECRET.
import { chromium } from 'playwright-core';
import { step, done, env, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const secret = env('WRITE_SECRET');
const OLD = 'Before the blip: walk with the frame, half your weight.';
const MID = 'During the blip: walk with one stick, full weight as tolerated.';
const TWIN = 'After the blip: walk with one stick, indoors and out.';

const write = async (value) => {
  const r = await signedWrite(base, secret, { patient: 'ray', domain: 'weight_bearing', audience: 'user', value, authorId: 'okafor', authorLabel: 'Sarah Okafor, physio' });
  if (r.status !== 201 && r.status !== 200) throw new Error(`write ${JSON.stringify(value)}: HTTP ${r.status} ${r.text}`);
};
const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const p = await ctx.newPage();
const status = async () => ((await p.locator('[data-testid="status"]').textContent()) || '').trim();
const walkingRow = () => p.locator('[data-testid="fact-row"][data-uri="care://ray/weight_bearing"]');

// Reads fail while failing is set; the event stream (GET) and every other request go through.
let failing = false, failed = 0;
await p.route('**/mcp', (route) => {
  const req = route.request();
  if (failing && req.method() === 'POST' && (req.postData() || '').includes('"resources/read"')) {
    failed++;
    return route.abort('failed');
  }
  return route.continue();
});

await write(OLD);
await step('echo.html: the walking instruction, Live', async () => {
  await p.goto(`${base}/echo.html#token=${encodeURIComponent(reader)}`);
  await walkingRow().getByText(OLD).waitFor({ state: 'visible', timeout: 10000 });
  await p.waitForFunction(() => document.querySelector('[data-testid="status"]').textContent.trim() === 'Live', null, { timeout: 10000 });
});

failing = true;
await write(MID);
await step('a revision whose re-read fails: the old words are not shown as current, and not "Live"', async () => {
  try { await walkingRow().locator('[data-testid="unconfirmed"]').waitFor({ state: 'visible', timeout: 10000 }); } catch {
    return `no "can't show the new words yet" on the walking row (${failed} reads refused); row: ${JSON.stringify(await walkingRow().innerText())}; status ${JSON.stringify(await status())}`;
  }
  if (failed === 0) return 'no read was refused: the test did not cut the re-read';
  const body = await p.locator('body').innerText();
  if (body.includes(OLD)) return 'the superseded words are still on screen: ' + body.slice(0, 400);
  const note = (await walkingRow().innerText()) || '';
  if (!/just changed/.test(note) || !/Don't follow/.test(note)) return 'the row says ' + JSON.stringify(note);
  if (/Live/.test(await status())) return 'status says ' + JSON.stringify(await status()) + ' while a read failed';
});
await step('the card keeps trying: a second read is refused too, and the old words stay hidden', async () => {
  const before = failed;
  for (const end = Date.now() + 15000; Date.now() < end && failed === before;) await new Promise((ok) => setTimeout(ok, 100));
  if (failed === before) return 'the card did not read again within 15 s';
  if ((await p.locator('body').innerText()).includes(OLD)) return 'the superseded words came back';
});

failing = false;
await step('once reads work again: the new words, the old ones struck through as withdrawn, Live', async () => {
  try { await walkingRow().getByText(MID).waitFor({ state: 'visible', timeout: 20000 }); } catch {
    return `the new words did not show within 20 s; row: ${JSON.stringify(await walkingRow().innerText())}`;
  }
  const old = (await p.locator('[data-testid="retraction-old"]').textContent()) || '';
  if (!(await p.locator('[data-testid="retraction"]').isVisible()) || !old.includes(OLD)) return 'retraction-old is ' + JSON.stringify(old);
  if ((await p.locator('[data-testid="retraction-new"]').textContent()) !== MID) return 'retraction-new is ' + JSON.stringify(await p.locator('[data-testid="retraction-new"]').textContent());
  await p.waitForFunction(() => document.querySelector('[data-testid="status"]').textContent.trim() === 'Live', null, { timeout: 10000 });
  if (await p.locator('[data-testid="unconfirmed"]').count()) return 'a row still says it cannot show the new words';
});

await step('the twin: a revision whose re-read works shows at once, Live throughout', async () => {
  await write(TWIN);
  await walkingRow().getByText(TWIN).waitFor({ state: 'visible', timeout: 10000 });
  if (await p.locator('[data-testid="unconfirmed"]').count()) return 'a row says it cannot show the new words';
  if (await status() !== 'Live') return 'status says ' + JSON.stringify(await status());
});
await browser.close();
done();
