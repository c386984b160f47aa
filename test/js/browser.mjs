// Part 6: Debian's Chromium, headless, driven by playwright-core (no browser
// download: executablePath). Loads the Echo Show card and the clinician page
// from the running server and checks what a person would see.
//
// env: UNSAY_E2E_URL (a server started with --alexa-verify=false
// --default-patient ray, so a plain POST /alexa is Ray's Echo Show),
// CHROMIUM, TOKEN_READER (care.read.user), TOKEN_WRITER (care.write and
// care.read.user, sub okafor), WRITE_SECRET, ARTIFACTS (screenshot dir).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, step, done, env, leaked, signedWrite } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const writer = env('TOKEN_WRITER');
const secret = env('WRITE_SECRET');
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });
const CURRENT = 'Full weight-bearing as tolerated.';
const CLINICIAN = 'Full weight-bearing as tolerated; walk outdoors twice a day (e2e clinician).';
// One live revision per viewport, each written while the card is open.
const LIVE = {
  1280: 'Full weight-bearing as tolerated; stairs with one crutch (e2e live).',
  960: 'Full weight-bearing as tolerated; stairs without a crutch (e2e live).',
};

/** Ray's next turn on his Echo Show: a LaunchRequest to /alexa; its speech, as plain text. */
let turns = 0;
async function rayTurn() {
  turns++;
  const app = { applicationId: 'amzn1.ask.skill.e2e-clinician' };
  const user = { userId: 'amzn1.ask.account.e2e-clinician' };
  const body = {
    version: '1.0',
    session: { new: true, sessionId: `amzn1.echo-api.session.e2e-clinician-${Date.now()}-${turns}`, application: app, user },
    context: {
      System: { application: app, user, apiEndpoint: 'https://api.amazonalexa.com',
        device: { deviceId: 'amzn1.ask.device.e2e-clinician', supportedInterfaces: { 'Alexa.Presentation.APL': { runtime: { maxVersion: '2024.3' } } } } },
      Viewport: { mode: 'HUB', shape: 'RECTANGLE', pixelWidth: 1280, pixelHeight: 800, dpi: 160, currentPixelWidth: 1280, currentPixelHeight: 800 },
    },
    request: { type: 'LaunchRequest', requestId: `amzn1.echo-api.request.e2e-clinician-${turns}`, timestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), locale: 'en-GB' },
  };
  const res = await fetch(base + '/alexa', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`/alexa answered ${res.status}: ${await res.text()}`);
  const j = await res.json();
  const os = (j.response && j.response.outputSpeech) || {};
  return String(os.ssml || os.text || '').replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
}

/** The timeline entry of version n, and its state and sentence. */
async function entry(p, n) {
  const e = p.locator(`[data-testid="timeline-entry"][data-version="${n}"]`);
  return {
    e,
    state: await e.getAttribute('data-state'),
    text: ((await e.locator('[data-testid="delivery-text"]').textContent().catch(() => '')) || '').trim(),
    notes: ((await e.locator('[data-testid="delivery-note"]').allTextContents().catch(() => [])) || []).join(' '),
    words: ((await e.locator('[data-testid="timeline-words"]').textContent().catch(() => '')) || '').trim(),
  };
}

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});

/** Elements whose box leaves the viewport, and the document's own overflow. */
async function overflow(page, vertical = true) {
  return page.evaluate((vertical) => {
    const w = window.innerWidth, h = window.innerHeight;
    const out = [];
    const de = document.documentElement;
    if (de.scrollWidth > w + 1) out.push(`document scrollWidth ${de.scrollWidth} > ${w}`);
    if (vertical && de.scrollHeight > h + 1) out.push(`document scrollHeight ${de.scrollHeight} > ${h}`);
    for (const el of document.body.querySelectorAll('*')) {
      const s = getComputedStyle(el);
      if (s.display === 'none' || s.visibility === 'hidden' || s.position === 'fixed' && el.getClientRects().length === 0) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.right > w + 1 || r.left < -1 || (vertical && (r.bottom > h + 1 || r.top < -1))) {
        out.push(`${el.tagName.toLowerCase()}${el.dataset.testid ? '[' + el.dataset.testid + ']' : ''} at ${Math.round(r.left)},${Math.round(r.top)}–${Math.round(r.right)},${Math.round(r.bottom)}`);
      }
      if (out.length > 5) break;
    }
    return out;
  }, vertical);
}

async function page(width, height) {
  const ctx = await browser.newContext({ viewport: { width, height } });
  const p = await ctx.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(String(e)));
  return { p, errors, ctx };
}

let current = CURRENT; // the walking instruction the server holds now
for (const [w, h] of [[1280, 800], [960, 480]]) {
  const tag = `${w}x${h}`;
  const { p, errors, ctx } = await page(w, h);
  await step(`echo.html#token at ${tag}: shows the current walking instruction`, async () => {
    await p.goto(`${base}/echo.html#token=${reader}`);
    await p.getByText(current, { exact: false }).first().waitFor({ state: 'visible', timeout: 15000 });
    const rows = await p.locator('[data-testid="fact-row"]').count();
    if (rows < 1) return 'no [data-testid=fact-row]';
  });
  await step(`echo.html#token at ${tag}: nothing overflows the viewport`, async () => {
    const o = await overflow(p);
    if (o.length) return o.join('; ');
  });
  await step(`echo.html#token at ${tag}: no assistant-only text in the DOM`, async () => {
    const html = await p.content();
    if (leaked(html)) return 'found ' + JSON.stringify(leaked(html));
  });
  await step(`echo.html#token at ${tag}: the exercise count has a large play control`, async () => {
    const b = p.locator('[data-testid="play-clip"]');
    await b.first().waitFor({ state: 'visible', timeout: 15000 });
    if (await b.count() !== 1) return `${await b.count()} play controls, want 1 (the speakable clip only)`;
    const box = await b.boundingBox();
    if (!box || box.height < 44 || box.width < 120) return `play control ${JSON.stringify(box)}: too small to press at arm's length`;
    if (box.x + box.width > w + 1 || box.y + box.height > h + 1) return `play control off screen: ${JSON.stringify(box)}`;
    const label = (await b.textContent()) || '';
    if (!/play the exercise count/i.test(label)) return 'play control says ' + JSON.stringify(label);
  });
  await step(`echo.html#token at ${tag}: pressing it plays the committed clip (fetched over MCP) to its end`, async () => {
    // Listen before pressing: the 9 s clip must reach "ended".
    const ended = p.evaluate(() => new Promise((resolve, reject) => {
      const a = document.querySelector('[data-testid="clip-audio"]');
      if (!a) return reject(new Error('no <audio> element'));
      a.addEventListener('ended', () => resolve({ duration: a.duration, src: a.currentSrc, type: a.getAttribute('data-uri') }), { once: true });
      a.addEventListener('error', () => reject(new Error('media error ' + (a.error && a.error.code))), { once: true });
      setTimeout(() => reject(new Error('not ended after 60 s (paused=' + a.paused + ', t=' + a.currentTime + ')')), 60000);
    }));
    await p.locator('[data-testid="play-clip"]').click();
    await p.locator('[data-testid="play-clip"][aria-pressed="true"]').waitFor({ state: 'visible', timeout: 10000 });
    const r = await ended.catch((e) => ({ error: String(e) }));
    if (r.error) return r.error;
    if (!(r.duration > 8 && r.duration < 10)) return `played a clip of ${r.duration} s, want the 9 s count`;
    if (!String(r.src).startsWith('blob:')) return 'the clip was not played from the bytes read over MCP: ' + r.src;
    if (r.type !== 'care://ray/exercise_clip') return 'played ' + r.type;
    const label = (await p.locator('[data-testid="play-clip"]').textContent()) || '';
    if (!/again/i.test(label)) return 'after the end the control says ' + JSON.stringify(label);
  });
  await step(`echo.html#token at ${tag}: no audio of an assistant-only clip on the page`, async () => {
    const uris = await p.locator('[data-testid="clip-audio"]').evaluateAll((as) => as.map((a) => a.getAttribute('data-uri')));
    if (uris.some((u) => !String(u).startsWith('care://'))) return 'audio elements for ' + uris.join(', ');
  });
  await p.screenshot({ path: join(artifacts, `echo-${tag}.png`) });
  {
    const shown = current;
    await step(`echo.html#token at ${tag}: a revision written while the card is open appears live`, async () => {
      const r = await signedWrite(base, secret, {
        patient: 'ray', domain: 'weight_bearing', audience: 'user', value: LIVE[w],
        authorId: 'okafor', authorLabel: 'Sarah Okafor, physio',
      });
      if (r.status !== 201) return `write: HTTP ${r.status} ${r.text}`;
      current = LIVE[w];
      await p.getByText(LIVE[w], { exact: false }).first().waitFor({ state: 'visible', timeout: 10000 });
    });
    await step(`echo.html#token at ${tag}: the retraction card withdraws the sentence that was on screen`, async () => {
      const box = p.locator('[data-testid="retraction"]');
      await box.waitFor({ state: 'visible', timeout: 5000 });
      const old = (await p.locator('[data-testid="retraction-old"]').textContent()) || '';
      if (!old.includes(shown.replace(/[.]$/, ''))) return `retraction-old is ${JSON.stringify(old)}, want ${JSON.stringify(shown)}`;
      const who = (await p.locator('[data-testid="retraction-who"]').textContent()) || '';
      if (!who.includes('Sarah Okafor')) return 'retraction-who is ' + JSON.stringify(who);
    });
    await step(`echo.html#token at ${tag}: the struck-through sentence is readable at arm's length`, async () => {
      const st = await p.locator('[data-testid="retraction-old"]').evaluate((e) => {
        const s = getComputedStyle(e);
        const value = document.querySelector('[data-testid="fact-row"] .value');
        return { size: parseFloat(s.fontSize), color: s.color, bg: getComputedStyle(e.closest('[data-testid="retraction"]')).backgroundColor,
          valueSize: value ? parseFloat(getComputedStyle(value).fontSize) : 0 };
      });
      const lum = (c) => {
        const [r, g, b] = (c.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number).map((v) => {
          v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const [hi, lo] = [lum(st.color), lum(st.bg)].sort((a, b) => b - a);
      const contrast = (hi + 0.05) / (lo + 0.05);
      // As large as the instructions themselves, and never under 16 px.
      const minPx = Math.max(16, st.valueSize);
      if (st.size + 0.5 < minPx) return `withdrawn sentence at ${st.size}px, want ≥ ${minPx}px (the instructions' size)`;
      if (contrast < 7) return `withdrawn sentence contrast ${contrast.toFixed(1)}:1, want ≥ 7:1`;
    });
    await step(`echo.html#token at ${tag}: nothing overflows the viewport with the retraction on top`, async () => {
      const o = await overflow(p);
      if (o.length) return o.join('; ');
    });
    await p.screenshot({ path: join(artifacts, `echo-${tag}-live.png`) });
    // U1: three revisions within about a second, the last back to the first's words.
    // The card withdraws the sentence that was on screen before them, and
    // the one on screen for an instant, never the words now current.
    const burstA = `Touch-toe weight-bearing only (${tag} burst).`, burstB = `Non-weight-bearing; use crutches (${tag} burst).`;
    await step(`echo.html#token at ${tag}: quick revisions withdraw every sentence the card showed`, async () => {
      const values = [burstA, burstB, burstA];
      const first = Math.floor(Date.now() / 1000);
      for (let i = 0; i < values.length; i++) {
        const value = values[i];
        // The revert's signed body must not repeat the first's (a replay):
        // it is signed in a later second.
        while (i === 2 && Math.floor(Date.now() / 1000) === first) await new Promise((res) => setTimeout(res, 50));
        const r = await signedWrite(base, secret, {
          patient: 'ray', domain: 'weight_bearing', audience: 'user', value,
          authorId: 'okafor', authorLabel: 'Sarah Okafor, physio',
        });
        if (r.status !== 201) return `write ${JSON.stringify(value)}: HTTP ${r.status} ${r.text}`;
        current = value;
        await new Promise((res) => setTimeout(res, 300));
      }
      let old = '', now = '';
      for (const end = Date.now() + 10000; Date.now() < end;) {
        old = (await p.locator('[data-testid="retraction-old"]').textContent()) || '';
        now = (await p.locator('[data-testid="retraction-new"]').textContent()) || '';
        if (now === burstA && old.includes(burstB)) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      if (now !== burstA) return `retraction-new is ${JSON.stringify(now)}, want ${JSON.stringify(burstA)}`;
      if (!old.includes(LIVE[w]) || !old.includes(burstB)) return `retraction-old is ${JSON.stringify(old)}: want both ${JSON.stringify(LIVE[w])} and ${JSON.stringify(burstB)}`;
      if (old.includes(burstA)) return `retraction-old ${JSON.stringify(old)} withdraws the words now current`;
    });
    await step(`echo.html#token at ${tag}: nothing overflows the viewport with several sentences withdrawn`, async () => {
      const o = await overflow(p);
      if (o.length) return o.join('; ');
    });
  }
  check(`echo.html at ${tag}: no script errors`, errors.length === 0, errors.join('\n'));
  await ctx.close();
}

{
  const { p, ctx } = await page(1280, 800);
  await step('echo.html without a token shows only how to open it', async () => {
    await p.goto(`${base}/echo.html`);
    await p.locator('[data-testid="no-token"]').waitFor({ state: 'visible', timeout: 10000 });
    if (await p.locator('[data-testid="fact-row"]').count()) return 'fact rows shown without a token';
    const html = await p.content();
    if (html.includes('weight-bearing')) return 'a care fact is on the page without a token';
  });
  await step('echo.html without a token tells a patient or carer what to do, in their words', async () => {
    const t = (await p.locator('[data-testid="no-token"]').textContent()) || '';
    if (!t.includes('Ask your care team for a new link to this screen')) return 'no-token says: ' + t;
    if (/make run|token|server/i.test(t)) return 'no-token speaks to a developer: ' + t;
  });
  await p.screenshot({ path: join(artifacts, 'echo-no-token.png') });
  await ctx.close();
}

{
  const { p, ctx } = await page(1280, 800);
  await step('echo.html with a refused link says to ask the care team, and no "Waiting" under it', async () => {
    await p.goto(`${base}/echo.html#token=not-a-valid-token`);
    const box = p.locator('[data-testid="refused"]');
    await box.waitFor({ state: 'visible', timeout: 15000 });
    const t = (await box.textContent()) || '';
    if (!t.includes('Ask your care team for a new link to this screen')) return 'refused says: ' + t;
    if (/make run|reader token|care\.read/i.test(t)) return 'refusal speaks to a developer: ' + t;
    if (await p.locator('[data-testid="waiting"]').isVisible()) return '"Waiting for your care notes…" shown under a refusal';
    if (await p.locator('[data-testid="fact-row"]').count()) return 'fact rows shown under a refusal';
  });
  await p.screenshot({ path: join(artifacts, 'echo-refused.png') });
  await ctx.close();
}

{
  const { p, errors, ctx } = await page(1280, 800);
  await step('clinician at 1280x800: loads and nothing overflows the viewport', async () => {
    await p.goto(`${base}/clinician`);
    await p.waitForLoadState('networkidle');
    const o = await overflow(p);
    if (o.length) return o.join('; ');
  });
  await step('clinician: no assistant-only text before signing in', async () => {
    const html = await p.content();
    if (leaked(html)) return 'found ' + JSON.stringify(leaked(html));
  });
  await step('clinician: a token the server would refuse is refused at sign-in, not at Save', async () => {
    const forged = writer.slice(0, writer.lastIndexOf('.') + 1) + 'AAAA' + writer.slice(writer.lastIndexOf('.') + 5);
    await p.locator('[data-testid="token"]').fill(forged);
    await p.locator('[data-testid="signin-submit"]').click();
    const e = p.locator('[data-testid="error-token"]');
    await p.waitForFunction(() => (document.querySelector('[data-testid="error-token"]').textContent || '').trim() !== '', null, { timeout: 10000 });
    const t = (await e.textContent()) || '';
    if (!/refused/i.test(t)) return 'error-token says: ' + t;
    if (await p.locator('[data-testid="signed-in"]').isVisible()) return 'signed in with a forged token';
  });
  await step('clinician: signs in with a care.write token', async () => {
    await p.locator('[data-testid="token"]').fill(writer);
    await p.locator('[data-testid="signin-submit"]').click();
    await p.locator('[data-testid="signed-in"]').waitFor({ state: 'visible', timeout: 5000 });
    const err = (await p.locator('[data-testid="error-token"]').textContent()) || '';
    if (err.trim()) return 'sign-in error: ' + err;
    const who = (await p.locator('[data-testid="signed-in"]').textContent()) || '';
    for (const w of ['okafor', 'ray', 'care.write', 'care.read.user', 'expires']) if (!who.includes(w)) return `signed-in line lacks ${w}: ${who}`;
  });
  await step('clinician: the author label is prefilled from his own previous version, not left blank', async () => {
    await p.locator('[data-testid="patient"]').fill('ray');
    await p.locator('[data-testid="domain"]').fill('weight_bearing');
    await p.waitForFunction(() => document.querySelector('[data-testid="authorLabel"]').value === 'Sarah Okafor, physio', null, { timeout: 10000 });
    const note = (await p.locator('[data-testid="authorLabel-note"]').textContent()) || '';
    if (!/your version \d+/i.test(note)) return 'authorLabel-note says: ' + note;
  });
  await step('clinician: an empty instruction is refused next to the field, and nothing is sent', async () => {
    await p.locator('[data-testid="patient"]').fill('ray');
    await p.locator('[data-testid="domain"]').fill('weight_bearing');
    await p.locator('[data-testid="value"]').fill('');
    await p.locator('[data-testid="authorLabel"]').fill('Sarah Okafor, physio');
    await p.locator('[data-testid="write-submit"]').click();
    const e = p.locator('[data-testid="error-value"]');
    await e.waitFor({ state: 'visible', timeout: 5000 });
    if (!((await e.textContent()) || '').trim()) return 'error-value is empty';
  });
  await step('clinician: a review date that has passed is refused next to the field, and nothing is sent', async () => {
    await p.locator('[data-testid="patient"]').fill('ray');
    await p.locator('[data-testid="domain"]').fill('weight_bearing');
    await p.locator('[data-testid="value"]').fill('Full weight-bearing as tolerated (past review date, never saved).');
    await p.locator('[data-testid="staleAfter"]').fill('2020-01-01T09:00');
    await p.locator('[data-testid="write-submit"]').click();
    const e = p.locator('[data-testid="error-staleAfter"]');
    await e.waitFor({ state: 'visible', timeout: 5000 });
    const t = (await e.textContent()) || '';
    if (!t.includes('That date has passed')) return 'error-staleAfter says: ' + t;
    if (await p.locator('[data-testid="write-result"]').isVisible()) return 'a write result is shown: something was sent';
    await p.locator('[data-testid="staleAfter"]').fill('');
  });
  await step("clinician: a mistyped patient is named as soon as it is typed, before a topic: \"Ray\" → did you mean ray?, \"rayy\" → no patient 'rayy'; \"ray\" is not flagged", async () => {
    await p.locator('[data-testid="domain"]').fill('');
    const patientError = async (typed) => {
      await p.locator('[data-testid="patient"]').fill(typed);
      await p.locator('[data-testid="patient"]').blur();
      await p.waitForFunction(() => (document.querySelector('[data-testid="error-patient"]').textContent || '').trim() !== '', null, { timeout: 10000 });
      return (await p.locator('[data-testid="error-patient"]').textContent()) || '';
    };
    let t = await patientError('Ray');
    if (!t.includes('Did you mean ray?') || t.includes('lowercase letters, digits')) return 'for "Ray", error-patient says: ' + t;
    t = await patientError('rayy');
    if (!t.includes("There is no patient 'rayy' for this token") || !t.includes('Did you mean ray?')) return 'for "rayy" with no topic, error-patient says: ' + t;
    await p.locator('[data-testid="patient"]').fill('Ray');
    await p.locator('[data-testid="patient"]').blur();
    const use = p.locator('[data-testid="patient-suggestion"]');
    await p.waitForFunction(() => { const b = document.querySelector('[data-testid="patient-suggestion"]'); return !!b && b.textContent === 'Use ray'; }, null, { timeout: 10000 });
    await use.click();
    await p.waitForFunction(() => document.querySelector('[data-testid="patient"]').value === 'ray' &&
      (document.querySelector('[data-testid="error-patient"]').textContent || '') === '' &&
      (document.querySelector('#current').textContent || '').includes('Choose a topic.'), null, { timeout: 10000 });
  });
  await step("clinician: a patient who is not the token's says \"no patient 'rayy' … did you mean ray?\" and offers no new topic", async () => {
    await p.locator('[data-testid="patient"]').fill('rayy');
    await p.locator('[data-testid="domain"]').fill('weight_bearing');
    await p.locator('[data-testid="value"]').fill('Full weight-bearing as tolerated (for a mistyped patient, never saved).');
    await p.locator('[data-testid="write-submit"]').click();
    await p.waitForFunction(() => (document.querySelector('[data-testid="error-patient"]').textContent || '').trim() !== '', null, { timeout: 10000 });
    const t = (await p.locator('[data-testid="error-patient"]').textContent()) || '';
    if (!t.includes("There is no patient 'rayy' for this token") || !t.includes('Did you mean ray?')) return 'error-patient says: ' + t;
    if (await p.locator('[data-testid="new-topic"]').isVisible()) return 'a new topic is offered for a patient the token cannot write for';
    if (await p.locator('[data-testid="write-result"]').isVisible()) return 'a write result is shown: something was sent';
    const r = await fetch(base + '/verify?uri=' + encodeURIComponent('care://rayy/weight_bearing'));
    if (r.status !== 404) return `care://rayy/weight_bearing exists (HTTP ${r.status})`;
    await p.locator('[data-testid="patient-suggestion"]').click();
    await p.waitForFunction(() => document.querySelector('[data-testid="patient"]').value === 'ray' &&
      (document.querySelector('[data-testid="error-patient"]').textContent || '') === '' &&
      !!document.querySelector('[data-testid="current-value"]'), null, { timeout: 10000 });
  });
  await step("clinician: a topic typed that does not exist asks \"create a new topic 'walkng'?\" and offers the known ones", async () => {
    await p.locator('[data-testid="domain"]').fill('walkng');
    await p.locator('[data-testid="value"]').fill('Walk to the end of the garden (a typo, never saved).');
    await p.locator('[data-testid="write-submit"]').click();
    const box = p.locator('[data-testid="new-topic"]');
    await box.waitFor({ state: 'visible', timeout: 10000 });
    const q = (await p.locator('[data-testid="new-topic-question"]').textContent()) || '';
    if (!q.includes("Create a new topic 'walkng'?")) return 'new-topic-question says: ' + q;
    const first = await p.locator('[data-testid="new-topic-choice"]').first().getAttribute('data-domain');
    if (first !== 'weight_bearing') return `the closest known topic offered first is ${first}, want weight_bearing (walking)`;
    if (await p.locator('[data-testid="write-result"]').isVisible()) return 'a write result is shown: something was sent';
    const r = await fetch(base + '/verify?uri=' + encodeURIComponent('care://ray/walkng'));
    if (r.status !== 404) return `care://ray/walkng exists (HTTP ${r.status}): the typo was created`;
    await p.locator('[data-testid="new-topic-choice"]').first().click();
    await p.waitForFunction(() => document.querySelector('[data-testid="domain"]').value === 'weight_bearing', null, { timeout: 5000 });
    if (await box.isVisible()) return 'the question stays after choosing a known topic';
  });
  let before = 0; // the version Ray heard before the clinician's revision
  await step('clinician: the timeline shows the version Ray heard at his turn, live', async () => {
    await p.locator('[data-testid="timeline-entry"]').first().waitFor({ state: 'visible', timeout: 10000 });
    const said = await rayTurn();
    if (!/weight/i.test(said)) return 'Ray heard no walking instruction: ' + said;
    before = Number(await p.locator('[data-testid="timeline-entry"]').first().getAttribute('data-version'));
    await p.waitForFunction((n) => {
      const e = document.querySelector(`[data-testid="timeline-entry"][data-version="${n}"]`);
      return e && e.getAttribute('data-state') === 'heard';
    }, before, { timeout: 10000 });
    const v = await entry(p, before);
    if (!/^Heard at \d{1,2}[:.]\d{2}.* on the Echo Show/.test(v.text)) return `version ${before}: ${JSON.stringify(v.text)}`;
  });
  await step('clinician: a revision is saved and reports how many listeners it reached', async () => {
    await p.locator('[data-testid="value"]').fill(CLINICIAN);
    await p.locator('[data-testid="write-submit"]').click();
    const r = p.locator('[data-testid="write-result"]');
    await r.waitFor({ state: 'visible', timeout: 10000 });
    const t = (await r.textContent()) || '';
    if (!/Delivered to \d+ listeners? at once \(open Echo Show cards and assistant sessions following this fact\); Ray hears the change at his next turn/.test(t)) return 'write-result says: ' + t;
    if ((await p.locator('[data-testid="error-value"]').textContent() || '').trim()) return 'stale field error left on the page';
  });
  await step('clinician timeline before Ray\'s next turn: the revision is pending, with its words, author and age', async () => {
    const n = before + 1;
    await p.waitForFunction((n) => {
      const e = document.querySelector(`[data-testid="timeline-entry"][data-version="${n}"]`);
      return e && e.getAttribute('data-state') === 'pending';
    }, n, { timeout: 10000 });
    const v = await entry(p, n);
    if (v.text !== 'Pending: Ray will hear the retraction at his next turn') return `version ${n} says ${JSON.stringify(v.text)}`;
    if (v.words !== CLINICIAN) return `version ${n}'s words are ${JSON.stringify(v.words)}`;
    const head = (await v.e.locator('.tl-head').textContent()) || '';
    if (!head.includes('Sarah Okafor, physio') || !/just now|minute/.test(head)) return `version ${n}'s head: ${head}`;
    const old = await entry(p, before);
    if (old.state !== 'heard' || !/Being withdrawn/.test(old.notes)) return `version ${before}: ${old.state} ${JSON.stringify(old.notes)}`;
    const html = await p.content();
    if (leaked(html)) return 'found ' + JSON.stringify(leaked(html));
  });
  await p.screenshot({ path: join(artifacts, 'clinician-timeline-before.png'), fullPage: true });
  await step("clinician timeline after Ray's next turn: it flips from pending to heard, live, without a reload", async () => {
    const n = before + 1;
    const said = await rayTurn();
    if (!said.startsWith('Stop')) return 'Ray\'s next turn did not open with the retraction: ' + said;
    await p.waitForFunction((n) => {
      const e = document.querySelector(`[data-testid="timeline-entry"][data-version="${n}"]`);
      return e && e.getAttribute('data-state') === 'heard';
    }, n, { timeout: 10000 });
    const v = await entry(p, n);
    if (!/^Heard at \d{1,2}[:.]\d{2}.* on the Echo Show$/.test(v.text)) return `version ${n} says ${JSON.stringify(v.text)}`;
    const old = await entry(p, before);
    if (!/^Withdrawn: Ray heard the newer version at/.test(old.notes)) return `version ${before}'s note: ${JSON.stringify(old.notes)}`;
    if ((await p.locator('[data-testid="live"]').textContent()) !== 'Live') return 'the page is not live';
  });
  await p.screenshot({ path: join(artifacts, 'clinician-timeline-after.png'), fullPage: true });
  const seedClip = (name) => fileURLToPath(new URL(`../../store/seeddata/${name}`, import.meta.url));
  await step('clinician: a WAV recording for the patient is refused next to the file field, saying Alexa needs an MP3', async () => {
    await p.locator('[data-testid="domain"]').fill('exercise_clip');
    await p.locator('[data-testid="value"]').fill('A slow count from one to ten (clinician page).');
    await p.locator('[data-testid="audio"]').setInputFiles(seedClip('gait_note.wav'));
    await p.locator('[data-testid="write-submit"]').click();
    const e = p.locator('[data-testid="error-audio"]');
    await p.waitForFunction(() => (document.querySelector('[data-testid="error-audio"]').textContent || '').trim() !== '', null, { timeout: 10000 });
    const t = (await e.textContent()) || '';
    if (!/MP3 that Alexa plays/.test(t) || !/lame -b 48/.test(t)) return 'error-audio says: ' + t;
  });
  await step('clinician: the same form with the MP3 recording is saved (the twin)', async () => {
    await p.locator('[data-testid="audio"]').setInputFiles(seedClip('exercise_clip.mp3'));
    await p.locator('[data-testid="write-submit"]').click();
    const r = p.locator('[data-testid="write-result"]');
    await p.waitForFunction(() => /Saved as version/.test(document.querySelector('[data-testid="write-result"]').textContent || ''), null, { timeout: 10000 });
    const t = (await r.textContent()) || '';
    if (!/Saved as version 3/.test(t)) return 'write-result says: ' + t;
    await p.locator('[data-testid="audio"]').setInputFiles([]);
  });
  await step('clinician: a review date three days ahead is saved (the twin of the date that has passed)', async () => {
    const d = new Date(Date.now() + 3 * 24 * 3600 * 1000);
    const pad = (n) => String(n).padStart(2, '0');
    const local = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
    await p.locator('[data-testid="domain"]').fill('exercise');
    await p.locator('[data-testid="value"]').fill('Heel slides twenty times, morning and evening (review in three days).');
    await p.locator('[data-testid="staleAfter"]').fill(local);
    await p.locator('[data-testid="write-submit"]').click();
    await p.waitForFunction(() => /Saved as version/.test(document.querySelector('[data-testid="write-result"]').textContent || ''), null, { timeout: 10000 });
    if (((await p.locator('[data-testid="error-staleAfter"]').textContent()) || '').trim()) return 'error-staleAfter is shown for a future date';
    await p.locator('[data-testid="staleAfter"]').fill('');
  });
  await step('clinician: nothing overflows the viewport width after signing in (the form may scroll down)', async () => {
    const o = await overflow(p, false);
    if (o.length) return o.join('; ');
  });
  await p.screenshot({ path: join(artifacts, 'clinician-1280x800.png') });
  check('clinician: no script errors', errors.length === 0, errors.join('\n'));
  await ctx.close();
}

await browser.close();
done();
