// Amazon's APL linter (apl-suggester, pinned) over every APL document Unsay
// ships: apl/documents/*.json and skill-package/response/display/*/document.json.
// A document is clean when the linter reports nothing, and no component uses
// a property that the linter's own component schemas mark deprecated (it
// reports those only as editor hints). One known limitation is allowed: the
// linter's version enum stops at 2024.2, so "version": "2024.3" is a WARNING
// on /version alone.
//
// env: FILES (paths separated by the platform's path delimiter).
import suggester from 'apl-suggester';
import { readFileSync } from 'node:fs';
import { delimiter, relative } from 'node:path';
import { check, step, done, env } from './lib.mjs';

const files = env('FILES').split(delimiter).filter(Boolean);
const validator = new suggester.StaticAplTemplateValidator();

// Component type → its JSON schema, from the linter's exports (FrameJSONSchema …).
const schemas = {};
for (const [k, v] of Object.entries(suggester)) {
  const m = /^(.*)JSONSchema$/.exec(k);
  const schema = v && (v.JSON_SCHEMA || v);
  if (m && schema && schema.properties) schemas[m[1]] = schema;
}

/** Every "type": X object whose property the linter's schema marks deprecated. */
function deprecated(node, path, out) {
  if (Array.isArray(node)) {
    node.forEach((c, i) => deprecated(c, `${path}/${i}`, out));
  } else if (node && typeof node === 'object') {
    const schema = typeof node.type === 'string' && schemas[node.type];
    if (schema) {
      for (const key of Object.keys(node)) {
        const p = schema.properties[key];
        if (p && p.deprecated) out.push(`${path}: ${node.type}.${key} — ${p.deprecationMessage || 'deprecated'}`);
      }
    }
    for (const [k, v] of Object.entries(node)) deprecated(v, `${path}/${k}`, out);
  }
  return out;
}

// The linter logs "No mixin for component" to the console for components
// without mixins; that is its own noise, not a finding.
const warn = console.warn;
console.warn = (...a) => { if (!/No mixin for component/.test(String(a[0]))) warn(...a); };

check('apl-suggester knows the Frame schema (the deprecation check is live)', !!(schemas.Frame && schemas.Frame.properties.backgroundColor && schemas.Frame.properties.backgroundColor.deprecated), 'FrameJSONSchema.backgroundColor is not marked deprecated');
check('there are APL documents to lint', files.length >= 3, 'FILES lists ' + files.length);

for (const f of files) {
  const name = relative(process.cwd() + '/..', f);
  await step(`apl-suggester: ${name} is clean`, async () => {
    const doc = JSON.parse(readFileSync(f, 'utf8'));
    const findings = (await validator.validate(doc))
      .filter((e) => !(e.path === '/version' && doc.version === '2024.3'))
      .map((e) => `${e.level} ${e.path}: ${e.errorMessage}`);
    findings.push(...deprecated(doc, '', []));
    if (findings.length) return findings.join('\n');
  });
}

// The twin: the linter must flag what this test claims it flags.
await step('apl-suggester flags a Container borderWidth and a Frame backgroundColor (broken twin)', async () => {
  const doc = {
    type: 'APL', version: '2024.2', mainTemplate: { parameters: [], items: [
      { type: 'Frame', backgroundColor: 'black', item: { type: 'Container', borderWidth: '0dp', items: [] } }] },
  };
  const findings = (await validator.validate(doc)).map((e) => e.errorMessage).join('\n') + '\n' + deprecated(doc, '', []).join('\n');
  if (!/borderWidth/.test(findings)) return 'borderWidth on a Container not flagged: ' + findings;
  if (!/backgroundColor/.test(findings)) return 'Frame backgroundColor not flagged: ' + findings;
});
done();
