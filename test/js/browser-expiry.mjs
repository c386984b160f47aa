// Part 6 (expired links): Debian's Chromium, headless, driven by
// playwright-core. An Echo Show card and a clinician page whose token
// expires while they are open must stop showing the instructions as
// current (P-24): the card turns to "This screen's link has expired … Ask
// your care team for a new link", the clinician page signs out saying so,
// and neither says "Live". The twin: a card with a token that has not
// expired keeps its rows, says "Live" and shows the revision written after
// the other token expired. A card whose event stream cannot open hides its instructions behind "This card is out of
// date" within OUTDATED_MS, and does not say "Live".
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_SHORT (care.read.user, expires within
// seconds), TOKEN_READER (care.read.user, a day), TOKEN_WRITER_SHORT
// (care.write and care.read.user, sub okafor, expires with TOKEN_SHORT),
// WRITE_SECRET.
import { chromium } from 'playwright-core';
import { step, done, env, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const short = env('TOKEN_SHORT');
const reader = env('TOKEN_READER');
const writerShort = env('TOKEN_WRITER_SHORT');
const secret = env('WRITE_SECRET');
const expMS = (tok) => JSON.parse(Buffer.from(tok.split('.')[1], 'base64url').toString()).exp * 1000;
const OLD = 'Before expiry: walk with the frame, as much weight as is comfortable.';
const NEW = 'After expiry: walk with one stick now, indoors and out.';

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const open = async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  return ctx.newPage();
};
const status = async (p) => ((await p.locator('[data-testid="status"]').textContent()) || '').trim();

let r = await signedWrite(base, secret, { patient: 'ray', domain: 'weight_bearing', audience: 'user', value: OLD, authorId: 'okafor', authorLabel: 'Sarah Okafor, physio' });
if (r.status !== 201 && r.status !== 200) throw new Error('write: ' + r.status + ' ' + r.text);

const expiring = await open();
const lasting = await open();
const cut = await open();
const clinician = await open();
for (const [name, p, tok] of [['expiring', expiring, short], ['lasting', lasting, reader]]) {
  await step(`echo.html with the ${name} token: the walking instruction, Live`, async () => {
    await p.goto(`${base}/echo.html#token=${encodeURIComponent(tok)}`);
    await p.getByText(OLD).first().waitFor({ state: 'visible', timeout: 10000 });
    await p.waitForFunction(() => document.querySelector('[data-testid="status"]').textContent.trim() === 'Live', null, { timeout: 10000 });
  });
}
await step('clinician with the expiring token: signed in, the current version shown', async () => {
  await clinician.goto(`${base}/clinician`);
  await clinician.locator('[data-testid="token"]').fill(writerShort);
  await clinician.locator('[data-testid="signin-submit"]').click();
  await clinician.locator('[data-testid="signed-in"]').waitFor({ state: 'visible', timeout: 5000 });
  await clinician.locator('[data-testid="patient"]').fill('ray');
  await clinician.locator('[data-testid="domain"]').fill('weight_bearing');
  await clinician.locator('[data-testid="current"]').getByText(OLD).waitFor({ state: 'visible', timeout: 10000 });
});

// The cut-off card's event stream (GET /mcp) never opens; its reads work.
await step('echo.html whose event stream cannot open: the instruction read, but not "Live"', async () => {
  await cut.route('**/mcp', (route) => (route.request().method() === 'GET' ? route.abort() : route.continue()));
  await cut.goto(`${base}/echo.html#token=${encodeURIComponent(reader)}`);
  await cut.getByText(OLD).first().waitFor({ state: 'visible', timeout: 10000 });
  await cut.waitForTimeout(3000);
  if (/Live/.test(await status(cut))) return 'status says ' + (await status(cut)) + ' with no event stream';
});

// Past the short tokens' exp, the clinician's revision.
await new Promise((ok) => setTimeout(ok, Math.max(0, expMS(short) - Date.now()) + 2000));
r = await signedWrite(base, secret, { patient: 'ray', domain: 'weight_bearing', audience: 'user', value: NEW, authorId: 'okafor', authorLabel: 'Sarah Okafor, physio' });
await step('the revision after the expiry is saved', async () => {
  if (r.status !== 201) return `write: HTTP ${r.status} ${r.text}`;
});

await step('echo.html with the expired token: the expired-link refusal, no instruction shown as current, not Live', async () => {
  const box = expiring.locator('[data-testid="refused"]');
  try { await box.waitFor({ state: 'visible', timeout: 20000 }); } catch {
    return `no refusal; status ${JSON.stringify(await status(expiring))}; page: ${(await expiring.locator('body').innerText()).slice(0, 300)}`;
  }
  const t = (await box.textContent()) || '';
  if (!t.includes('expired') || !t.includes('Ask your care team for a new link to this screen')) return 'refused says: ' + t;
  const body = await expiring.locator('body').innerText();
  if (body.includes(OLD)) return 'the superseded instruction is still on screen: ' + body;
  if (await expiring.locator('[data-testid="fact-row"]:visible').count()) return 'fact rows visible under the refusal';
  if (/Live/.test(await status(expiring))) return 'status says ' + (await status(expiring));
});
await step('echo.html with the lasting token (the twin): the revision shown, Live', async () => {
  await lasting.getByText(NEW).first().waitFor({ state: 'visible', timeout: 10000 });
  if (await lasting.locator('[data-testid="refused"]').isVisible()) return 'the lasting card was refused';
  if (await status(lasting) !== 'Live') return 'status says ' + (await status(lasting));
  if (!(await lasting.locator('[data-testid="fact-row"]').first().isVisible())) return 'no fact row on the lasting card';
});
await step('clinician with the expired token: signed out saying so, no current version on screen', async () => {
  try { await clinician.locator('[data-testid="signed-in"]').waitFor({ state: 'hidden', timeout: 20000 }); } catch {
    return 'still signed in; live says ' + ((await clinician.locator('[data-testid="live"]').textContent()) || '');
  }
  const e = ((await clinician.locator('[data-testid="error-token"]').textContent()) || '').trim();
  if (!/expired/.test(e)) return 'error-token says: ' + e;
  if (await clinician.locator('[data-testid="current"]').isVisible()) return 'the current version is still shown';
  if (await clinician.locator('[data-testid="live"]').isVisible()) return '"Live" still shown';
});
await step('echo.html that cannot reconnect: "This card is out of date", its instructions hidden, not Live', async () => {
  const box = cut.locator('[data-testid="outdated"]');
  try { await box.waitFor({ state: 'visible', timeout: 40000 }); } catch {
    return `no out-of-date notice; status ${JSON.stringify(await status(cut))}`;
  }
  if (await cut.getByText(OLD).first().isVisible()) return 'the instruction is still shown as current';
  if (/Live/.test(await status(cut))) return 'status says ' + (await status(cut));
});
await browser.close();
done();
