// Part 6 (a review date that passes while the card is open, finding U15):
// Debian's Chromium, headless, driven by playwright-core. The voice says an
// instruction is past its review date the moment the date passes; the Echo
// Show card, open all the while, must mark it too (P-7, P-24) — without
// reading it again. The twin: an instruction whose review date is still
// ahead is shown without the mark. The clinician page, open on a topic,
// says the review date under the current words and, once it passes, that
// Ray hears it as past its review date — without a lookup again; the twin
// (reviewed in an hour) still says only when.
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_READER (care.read.user), TOKEN_WRITER
// (care.write care.read.user, sub okafor), WRITE_SECRET.
import { chromium } from 'playwright-core';
import { step, done, env, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const writer = env('TOKEN_WRITER');
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

// The clinician page.
const CONTACT = 'Review soon: call the ward on 0161 555 0100 with any worry.';
const soon2 = Date.now() + 8000;
await write('contact', CONTACT, new Date(soon2).toISOString().replace(/\.\d+Z$/, 'Z'));
const c = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const review = () => c.locator('[data-testid="current-review"]');
const lookUp = async (domain, words) => {
  await c.locator('[data-testid="patient"]').fill('ray');
  await c.locator('[data-testid="domain"]').fill(domain);
  await c.locator('[data-testid="current-value"]').getByText(words).waitFor({ state: 'visible', timeout: 10000 });
};
await step('clinician: the contact instruction says its review date under the current words, not past', async () => {
  await c.goto(`${base}/clinician`);
  await c.locator('[data-testid="token"]').fill(writer);
  await c.locator('[data-testid="signin-submit"]').click();
  await c.locator('[data-testid="signed-in"]').waitFor({ state: 'visible', timeout: 5000 });
  await lookUp('contact', CONTACT);
  if (Date.now() >= soon2) return 'the page took longer than the review date to open: the test cannot tell';
  const t = (await review().textContent()) || '';
  if (!t.startsWith('Review date') || /past its review date and/i.test(t)) return 'current-review says: ' + JSON.stringify(t);
});
await step('clinician: once the date passes the page says Ray hears it as past its review date, without a lookup', async () => {
  try {
    await c.waitForFunction(() => /^Past its review date/.test((document.querySelector('[data-testid="current-review"]') || {}).textContent || ''), null,
      { timeout: Math.max(0, soon2 - Date.now()) + 2000 });
  } catch { return 'current-review 2 s after the date says: ' + JSON.stringify((await review().textContent()) || ''); }
});
await step('clinician, the twin: the exercises, reviewed in an hour, say only when', async () => {
  await lookUp('exercise', LATER);
  const t = (await review().textContent()) || '';
  if (!t.startsWith('Review date')) return 'current-review says: ' + JSON.stringify(t);
});
await browser.close();
done();
