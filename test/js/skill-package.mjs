// Part 5: the skill package (skill-package/) validated against Amazon's own
// SMAPI model: ask-smapi-model's spec.json (Swagger 2.0), definitions
// v1.skill.Manifest.SkillManifestEnvelope and
// v1.skill.interactionModel.InteractionModelData, loaded into ajv with
// strict:false. Each validation has a negative twin (a broken copy must be
// refused) so the validator is shown able to fail. Limit: polymorphic interfaces[] (a Swagger discriminator) are not deep-checked.
//
// env: PKG (path of skill-package/), RESOURCES (path of ask-resources.json).
import Ajv from 'ajv';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { check as check0, step as step0, done, env } from './lib.mjs';

// LABEL prefixes every check name (the source folder, or the build copy).
const label = process.env.LABEL ? process.env.LABEL + ': ' : '';
const check = (name, ok, detail) => check0(label + name, ok, detail);
const step = (name, fn) => step0(label + name, fn);
const expectEndpoint = process.env.EXPECT_ENDPOINT || '';

const pkg = env('PKG');
const resources = env('RESOURCES');
const require = createRequire(import.meta.url);
const spec = JSON.parse(readFileSync(require.resolve('ask-smapi-model/spec.json'), 'utf8'));

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema({ $id: 'smapi', definitions: spec.definitions });
const manifest = ajv.getSchema('smapi#/definitions/v1.skill.Manifest.SkillManifestEnvelope');
const imodel = ajv.getSchema('smapi#/definitions/v1.skill.interactionModel.InteractionModelData');
const errs = (v) => ajv.errorsText(v.errors, { separator: '; ' });

const skill = JSON.parse(readFileSync(join(pkg, 'skill.json'), 'utf8'));

check('skill.json is a valid SkillManifestEnvelope', manifest(skill), errs(manifest));
{
  const bad = structuredClone(skill);
  bad.manifest.apis.custom.endpoint.sslCertificateType = 'Homemade';
  check('a skill.json with a bad sslCertificateType is refused (negative twin)', !manifest(bad), 'accepted');
}
await step('skill.json: custom endpoint …/alexa, APL interface, notifications permission', () => {
  const c = skill.manifest.apis.custom;
  if (!/\/alexa$/.test(c.endpoint.uri)) return 'endpoint uri ' + c.endpoint.uri;
  if (expectEndpoint && c.endpoint.uri !== expectEndpoint) return `endpoint uri ${c.endpoint.uri}, want ${expectEndpoint}`;
  if (expectEndpoint && skill.manifest.events && skill.manifest.events.endpoint && skill.manifest.events.endpoint.uri !== expectEndpoint) {
    return 'events endpoint ' + skill.manifest.events.endpoint.uri;
  }
  if (!(c.interfaces || []).some((i) => i.type === 'ALEXA_PRESENTATION_APL')) return 'no ALEXA_PRESENTATION_APL interface';
  if (!(skill.manifest.permissions || []).some((p) => p.name === 'alexa::devices:all:notifications:write')) return 'no notifications permission';
});

const dir = join(pkg, 'interactionModels', 'custom');
const locales = readdirSync(dir).filter((f) => /^[a-z]{2}-[A-Z]{2}\.json$/.test(f));
check('interaction models for en-US and en-GB', locales.includes('en-US.json') && locales.includes('en-GB.json'), 'found ' + locales.join(', '));
for (const f of locales) {
  const m = JSON.parse(readFileSync(join(dir, f), 'utf8'));
  check(`${f} is valid InteractionModelData`, imodel(m), errs(imodel));
  check(`${f}: invocation name "care notes"`, m.interactionModel.languageModel.invocationName === 'care notes',
    m.interactionModel.languageModel.invocationName);
  const names = m.interactionModel.languageModel.intents.map((i) => i.name);
  const wanted = ['CarePlanIntent', 'WhatsChangedIntent', 'MoreIntent', 'LinkDeviceIntent', 'AMAZON.HelpIntent',
    'AMAZON.StopIntent', 'AMAZON.CancelIntent', 'AMAZON.FallbackIntent', 'AMAZON.NavigateHomeIntent', 'AMAZON.RepeatIntent'];
  const missing = wanted.filter((w) => !names.includes(w));
  check(`${f}: has every intent Unsay handles`, missing.length === 0, 'missing ' + missing.join(', '));
  const bad = structuredClone(m);
  delete bad.interactionModel.languageModel.invocationName;
  check(`${f} without invocationName is refused (negative twin)`, !imodel(bad), 'accepted');
}

await step('ask-resources.json points ask deploy at ./skill-package', () => {
  if (!existsSync(resources)) return 'missing ' + resources;
  const r = JSON.parse(readFileSync(resources, 'utf8'));
  const src = r.profiles && r.profiles.default && r.profiles.default.skillMetadata && r.profiles.default.skillMetadata.src;
  if (!src || !/skill-package\/?$/.test(src)) return 'skillMetadata.src is ' + JSON.stringify(src);
});
done();
