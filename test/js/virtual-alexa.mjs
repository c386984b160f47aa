// Part 3: virtual-alexa (npm, pinned) turns utterances into Alexa requests
// from the skill's own interaction model (skill-package/interactionModels/
// custom/en-US.json) and posts them to the running /alexa, which was started
// with --alexa-verify=false --default-patient ray (virtual-alexa sends no
// signature headers).
//
// env: ALEXA_URL (…/alexa), MODEL (path of en-US.json), SKILL_ID.
import va from 'virtual-alexa';
import { readFileSync } from 'node:fs';
import { check, step, done, env, leaked } from './lib.mjs';

const { VirtualAlexa } = va;
const alexaURL = env('ALEXA_URL');
const modelPath = env('MODEL');
const skillID = env('SKILL_ID');
const model = JSON.parse(readFileSync(modelPath, 'utf8'));
const intents = model.interactionModel.languageModel.intents.map((i) => i.name);

/** A virtual Echo; APL adds the Alexa.Presentation.APL interface (an Echo Show). */
function device(apl) {
  const alexa = VirtualAlexa.Builder().interactionModelFile(modelPath).skillURL(alexaURL)
    .applicationID(skillID).locale('en-US').create();
  const sent = [];
  alexa.filter((req) => {
    if (apl) {
      req.context.System.device.supportedInterfaces['Alexa.Presentation.APL'] = { runtime: { maxVersion: '2024.3' } };
    }
    sent.push(req);
  });
  return { alexa, sent };
}

const all = []; // every response received, for the leak audit
function speech(r) {
  all.push(r);
  const os = r && r.response && r.response.outputSpeech;
  if (!os) return '';
  const raw = os.ssml || os.text || '';
  return raw.replace(/<[^>]*>/g, ' ').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>').replace(/&amp;/g, '&').replace(/\s+/g, ' ').trim();
}
function directiveTypes(r) {
  return ((r.response && r.response.directives) || []).map((d) => d.type);
}
function walkingSentence(s) {
  const m = [...s.matchAll(/“([^”]+)”/g)].map((x) => x[1]).find((q) => /weight/i.test(q));
  return m || '';
}

const show = device(true);
let walking = '';

await step('launch on an Echo Show speaks the current walking instruction and draws an APL card', async () => {
  const r = await show.alexa.launch();
  const s = speech(r);
  walking = walkingSentence(s);
  if (!walking) return 'no quoted weight-bearing instruction in: ' + s;
  if (!directiveTypes(r).includes('Alexa.Presentation.APL.RenderDocument')) return 'no RenderDocument: ' + JSON.stringify(directiveTypes(r));
});

const phrasings = [
  "what's my walking instruction",
  'what about my crutches', // not "tell me about …": virtual-alexa parses a leading "tell" as a launch phrase
  'remind me about my walking frame',
  'how much weight',
];
for (const p of phrasings) {
  await step(`"${p}" reaches CarePlanIntent and answers with the walking instruction`, async () => {
    const r = await show.alexa.utter(p);
    const req = show.sent[show.sent.length - 1].request;
    if (req.type !== 'IntentRequest' || req.intent.name !== 'CarePlanIntent') {
      return 'virtual-alexa resolved it to ' + (req.intent ? req.intent.name : req.type) + ' (the model lacks this phrasing)';
    }
    const s = speech(r);
    if (!walking || !s.includes(walking)) return `answer does not quote ${JSON.stringify(walking)}: ${s}`;
  });
}

await step('"what changed" reaches WhatsChangedIntent and answers', async () => {
  const r = await show.alexa.utter('what changed');
  const req = show.sent[show.sent.length - 1].request;
  if (!req.intent || req.intent.name !== 'WhatsChangedIntent') return 'resolved to ' + JSON.stringify(req.intent && req.intent.name);
  if (!speech(r)) return 'no speech';
});

await step('help answers and keeps the session open', async () => {
  const r = await show.alexa.utter('help');
  if (!speech(r)) return 'no speech';
  if (r.response.shouldEndSession === true) return 'help ended the session';
});

await step('stop says goodbye and ends the session', async () => {
  const r = await show.alexa.utter('stop');
  if (r.response.shouldEndSession !== true) return 'shouldEndSession is ' + JSON.stringify(r.response.shouldEndSession);
});

await step('a device without a screen gets speech and no APL directive', async () => {
  const dot = device(false);
  const r = await dot.alexa.launch();
  if (!walkingSentence(speech(r))) return 'no walking instruction: ' + speech(r);
  if (directiveTypes(r).some((t) => t.startsWith('Alexa.Presentation.APL'))) return 'APL sent to a device without APL: ' + JSON.stringify(directiveTypes(r));
});

// Every intent in the model is answered by the running skill (model ↔ handlers).
for (const name of intents) {
  await step(`model intent ${name} is answered by the running /alexa`, async () => {
    const d = device(true);
    await d.alexa.launch();
    const r = await d.alexa.intend(name);
    if (!r || !r.response) return 'no response envelope: ' + JSON.stringify(r);
    if (name !== 'AMAZON.StopIntent' && name !== 'AMAZON.CancelIntent' && !speech(r) && !directiveTypes(r).length) {
      return 'neither speech nor a directive: ' + JSON.stringify(r);
    }
  });
}

await step('a SessionEndedRequest is answered with an empty response', async () => {
  const d = device(true);
  await d.alexa.launch();
  const r = await d.alexa.endSession();
  if (r && r.response && r.response.outputSpeech) return 'speech after SessionEnded: ' + JSON.stringify(r);
});

{
  const s = JSON.stringify(all);
  check('no assistant-only text in any response', !leaked(s), 'found ' + JSON.stringify(leaked(s)));
}
done();
