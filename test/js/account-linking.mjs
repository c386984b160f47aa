// The account-linking request `make skill-package` writes
// (accountLinking.json, for `ask smapi update-account-linking-info`),
// validated against ask-smapi-model's v1.skill.accountLinking.AccountLinkingRequest
// with ajv (strict:false), with a broken twin that must be refused, and
// checked against what Unsay's authorization server serves: the
// authorization code grant, its authorize and token URLs, care.read.user only.
//
// env: FILE (accountLinking.json), LABEL, EXPECT_BASE (the public URL, optional).
import Ajv from 'ajv';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { check as check0, done, env } from './lib.mjs';

const label = process.env.LABEL ? process.env.LABEL + ': ' : '';
const check = (name, ok, detail) => check0(label + name, ok, detail);
const expectBase = process.env.EXPECT_BASE || '';
const require = createRequire(import.meta.url);
const spec = JSON.parse(readFileSync(require.resolve('ask-smapi-model/spec.json'), 'utf8'));
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema({ $id: 'smapi', definitions: spec.definitions });
const validate = ajv.getSchema('smapi#/definitions/v1.skill.accountLinking.AccountLinkingRequest');
const errs = () => ajv.errorsText(validate.errors, { separator: '; ' });

const doc = JSON.parse(readFileSync(env('FILE'), 'utf8'));
check('accountLinking.json is a valid SMAPI AccountLinkingRequest', validate(doc), errs());
{
  const bad = structuredClone(doc);
  bad.accountLinkingRequest.type = 'PASSWORD';
  check('an account-linking request of an unknown type is refused (negative twin)', !validate(bad), 'accepted');
  const bad2 = structuredClone(doc);
  bad2.accountLinkingRequest.accessTokenScheme = 'QUERY_STRING';
  check('an unknown client authentication scheme is refused (negative twin)', !validate(bad2), 'accepted');
}
const r = doc.accountLinkingRequest || {};
check('authorization code grant with HTTP Basic client authentication', r.type === 'AUTH_CODE' && r.accessTokenScheme === 'HTTP_BASIC',
  `${r.type} ${r.accessTokenScheme}`);
check('Alexa asks only for care.read.user', JSON.stringify(r.scopes) === '["care.read.user"]', JSON.stringify(r.scopes));
check('authorize and token URLs are the embedded authorization server\'s', /\/oauth\/authorize$/.test(r.authorizationUrl || '') &&
  /\/oauth\/token$/.test(r.accessTokenUrl || '') && (!expectBase || (r.authorizationUrl === expectBase + '/oauth/authorize' &&
  r.accessTokenUrl === expectBase + '/oauth/token')), `${r.authorizationUrl} ${r.accessTokenUrl}`);
check('linking by voice stays possible: skipOnEnablement', r.skipOnEnablement === true, String(r.skipOnEnablement));
done();
