// Part 6 (a review date that passes while the card is open, finding U15):
// Debian's Chromium, headless, driven by playwright-core. The voice says an
// instruction is past its review date the moment the date passes; the Echo
// Show card, open all the while, must mark it too (P-7, P-24) — without
// reading it again. The twin: an instruction whose review date is still
// ahead is shown without the mark.
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_READER (care.read.user), WRITE_SECRET.
import { chromium } from 'playwright-core';
import { step, done, env, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const secret = env('WRITE_SECRET');
const SOON = 'Review soon: walk with the frame until the physio sees you.';
const LATER = 'Review later: ankle pumps every hour while awake.';

const write = async (domain, value, staleAfter) => {
  const r = await signedWrite(base, secret, { patient: 'ray', domain, audience: 'user', value, authorId: 'okafor', authorLabel: 'Sarah Okafor, physio', staleAfter });
  if (r.status !== 201) throw new Error(`write ${domain}: HTTP ${r.status} ${r.text}`);
};
const soon = Date.now() + 8000;
await write('weight_bearing', SOON, new Date(soon).toISOString().replace(/\.\d+Z$/, 'Z'));
await write('exercise', LATER, new Date(Date.now() + 3600e3).toISOString().replace(/\.\d+Z$/, 'Z'));

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const p = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const row = (uri) => p.locator(`[data-testid="fact-row"][data-uri="${uri}"]`);
let reads = 0;
p.on('request', (req) => { if (req.method() === 'POST' && (req.postData() || '').includes('"resources/read"')) reads++; });

await step('echo.html: both instructions shown, neither marked past its review date yet', async () => {
  await p.goto(`${base}/echo.html#token=${encodeURIComponent(reader)}`);
  await row('care://ray/weight_bearing').getByText(SOON).waitFor({ state: 'visible', timeout: 10000 });
  await row('care://ray/exercise').getByText(LATER).waitFor({ state: 'visible', timeout: 10000 });
  if (Date.now() >= soon) return 'the page took longer than the review date to open: the test cannot tell';
  for (const u of ['care://ray/weight_bearing', 'care://ray/exercise']) {
    if (await row(u).locator('[data-testid="stale"]').count()) return `${u} marked stale before its review date`;
  }
});
const before = reads;
await step('the walking instruction is marked past its review date within 2 s of it, without a read', async () => {
  try { await row('care://ray/weight_bearing').locator('[data-testid="stale"]').waitFor({ state: 'visible', timeout: Math.max(0, soon - Date.now()) + 2000 }); } catch {
    return `not marked 2 s after its review date; row: ${JSON.stringify(await row('care://ray/weight_bearing').innerText())}`;
  }
  if (reads !== before) return `the card read again (${reads - before} reads) instead of marking what it held`;
});
await step('the twin: the exercises, reviewed in an hour, are not marked', async () => {
  if (await row('care://ray/exercise').locator('[data-testid="stale"]').count()) return 'the exercises are marked stale';
});
await browser.close();
done();
