// Part 6 (bad links): Debian's Chromium, headless, driven by playwright-core.
// A link or token a person was given that is broken — cut short, with a
// stray %00, re-signed by someone else, not a token at all — must show the
// plain refusal a person can act on, never a browser error or "trying
// again" forever; and the good link beside each one still works.
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_READER (care.read.user), TOKEN_WRITER
// (care.write and care.read.user), TOKEN_ASSISTANT (care.read.assistant
// only), ARTIFACTS (screenshot dir).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { step, done, env } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const writer = env('TOKEN_WRITER');
const assistant = env('TOKEN_ASSISTANT');
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});

/** A token whose signature was changed: well formed, refused by the server (401). */
function forged(tok) {
  const i = tok.lastIndexOf('.') + 1;
  return tok.slice(0, i) + (tok[i] === 'A' ? 'B' : 'A') + tok.slice(i + 1);
}

// ---- echo.html#token=… ------------------------------------------------------

const echoCases = [
  // [name, fragment, what the refusal says]
  ['a valid token with %00 after it', encodeURIComponent(reader) + '%00', 'not valid'],
  ['a valid token with a space in it', reader.slice(0, 20) + '%20' + reader.slice(20), 'not valid'],
  ['a valid token with a letter outside ASCII', encodeURIComponent(reader + 'é'), 'not valid'],
  ['a token the server refuses (forged signature, 401)', forged(reader), 'expired or belongs to another service'],
  ['a token cut short (401)', reader.slice(0, reader.lastIndexOf('.')), 'expired or belongs to another service'],
  // U14: a token that cannot read what Ray hears waited "for your care notes" forever.
  ['a token of care.read.assistant only', encodeURIComponent(assistant), 'does not allow reading these care notes'],
];
for (const [name, frag, says] of echoCases) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await ctx.newPage();
  await step(`echo.html with ${name}: the refusal, not "trying again"`, async () => {
    await p.goto(`${base}/echo.html#token=${frag}`);
    const box = p.locator('[data-testid="refused"]');
    await box.waitFor({ state: 'visible', timeout: 15000 });
    const t = (await box.textContent()) || '';
    if (!t.includes(says)) return `refused says ${JSON.stringify(t)}, want it to say "${says}"`;
    if (!t.includes('Ask your care team for a new link to this screen')) return 'refused says: ' + t;
    const err = p.locator('[data-testid="error"]');
    if (await err.isVisible()) return 'an error line beside the refusal: ' + (await err.textContent());
    if (await p.locator('[data-testid="fact-row"]').count()) return 'fact rows shown under a refusal';
    // It stays refused: no retry turns it into "Can't reach … trying again".
    await p.waitForTimeout(2500);
    if (!(await box.isVisible())) return 'the refusal was replaced';
    if (/trying again/i.test(await p.locator('body').innerText())) return '"trying again" on the page';
  });
  await ctx.close();
}
{
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await ctx.newPage();
  await step('echo.html with the valid token: the card, no refusal (the twin)', async () => {
    await p.goto(`${base}/echo.html#token=${encodeURIComponent(reader)}`);
    await p.locator('[data-testid="fact-row"]').first().waitFor({ state: 'visible', timeout: 15000 });
    if (await p.locator('[data-testid="refused"]').isVisible()) return 'a valid link was refused';
  });
  await ctx.close();
}

// ---- the clinician's sign-in ------------------------------------------------

const clinicianCases = [
  ['a payload that is not base64url', 'eyJhbGciOiJIUzI1NiJ9.@@@!.c2ln'],
  ['a payload that is base64 but not JSON', 'eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln'],
  ['a payload that is a JSON array', 'eyJhbGciOiJIUzI1NiJ9.WzEsMl0.c2ln'],
  ['two parts', 'eyJhbGciOiJIUzI1NiJ9.c2ln'],
  ['a valid token with a letter outside ASCII', writer + 'é'],
  ['a valid token with a space in it', writer.slice(0, 20) + ' ' + writer.slice(20)],
];
{
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const p = await ctx.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(String(e)));
  await p.goto(`${base}/clinician`);
  await p.waitForLoadState('networkidle');
  for (const [name, tok] of clinicianCases) {
    await step(`clinician sign-in with ${name}: "That sign-in token is not valid; ask for a new one."`, async () => {
      await p.locator('[data-testid="token"]').fill(tok);
      await p.evaluate(() => { document.querySelector('[data-testid="error-token"]').textContent = ''; });
      await p.locator('[data-testid="signin-submit"]').click();
      await p.waitForFunction(() => (document.querySelector('[data-testid="error-token"]').textContent || '').trim() !== '', null, { timeout: 10000 });
      const t = ((await p.locator('[data-testid="error-token"]').textContent()) || '').trim();
      if (t !== 'That sign-in token is not valid; ask for a new one.') return 'error-token says: ' + t;
      if (await p.locator('[data-testid="signed-in"]').isVisible()) return 'signed in with a malformed token';
    });
  }
  await p.screenshot({ path: join(artifacts, 'clinician-bad-token.png') });
  await step('clinician sign-in with a forged signature: refused by the server at sign-in', async () => {
    await p.locator('[data-testid="token"]').fill(forged(writer));
    await p.evaluate(() => { document.querySelector('[data-testid="error-token"]').textContent = ''; });
    await p.locator('[data-testid="signin-submit"]').click();
    await p.waitForFunction(() => (document.querySelector('[data-testid="error-token"]').textContent || '').trim() !== '', null, { timeout: 10000 });
    const t = (await p.locator('[data-testid="error-token"]').textContent()) || '';
    if (!/refused/i.test(t)) return 'error-token says: ' + t;
  });
  await step('clinician sign-in with the valid token: signed in (the twin)', async () => {
    await p.locator('[data-testid="token"]').fill(writer);
    await p.locator('[data-testid="signin-submit"]').click();
    await p.locator('[data-testid="signed-in"]').waitFor({ state: 'visible', timeout: 10000 });
    const t = ((await p.locator('[data-testid="error-token"]').textContent()) || '').trim();
    if (t) return 'sign-in error beside a good token: ' + t;
  });
  await step('clinician sign-in with "Bearer <token>", as copied from a curl line: signed in (U14)', async () => {
    await p.locator('#signout').click();
    await p.locator('[data-testid="token"]').waitFor({ state: 'visible', timeout: 10000 });
    await p.locator('[data-testid="token"]').fill('Bearer ' + writer);
    await p.locator('[data-testid="signin-submit"]').click();
    try { await p.locator('[data-testid="signed-in"]').waitFor({ state: 'visible', timeout: 10000 }); } catch {
      return 'not signed in; error-token says: ' + ((await p.locator('[data-testid="error-token"]').textContent()) || '');
    }
  });
  await step('clinician: no uncaught page error on any of those', async () => {
    if (errors.length) return errors.join('; ');
  });
  await ctx.close();
}

await browser.close();
done();
