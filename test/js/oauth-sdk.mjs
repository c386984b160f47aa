// OAuth part: the official MCP TypeScript SDK's own OAuth client (its
// OAuthClientProvider and auth(), not ours) against the running server,
// starting from nothing but the /mcp URL: 401 → protected-resource metadata
// → authorization server metadata → dynamic registration → authorize, where
// headless Chromium (playwright-core) fills in the consent page with a link
// code → token → Ray's facts; a refresh; then `unsay grants revoke` and the
// next request is 401 with error="invalid_token".
//
// env: UNSAY_E2E_URL, CHROMIUM, LINK_CODE (a fresh `unsay link` code for
// ray), UNSAY_BIN and UNSAY_DB (for `unsay grants`), ARTIFACTS.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { check, step, done, env, leaked } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const linkCode = env('LINK_CODE');
const unsay = env('UNSAY_BIN');
const db = env('UNSAY_DB');
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });
const mcpURL = new URL(base + '/mcp');
const REDIRECT = 'http://127.0.0.1:9/oauth-callback';

/** An in-memory OAuthClientProvider, as an MCP host keeps one per server. */
class Provider {
  constructor() {
    this.info = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.authorizationUrl = undefined;
    this.registrations = 0;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: 'TypeScript SDK e2e host', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none',
    };
  }
  state() { return 'ts-e2e-state'; }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; this.registrations++; }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; }
  redirectToAuthorization(url) { this.authorizationUrl = url; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

const provider = new Provider();

async function connect() {
  const client = new Client({ name: 'unsay-oauth-e2e', version: '1' });
  const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
}

// 1. Only the URL: the SDK meets the 401, discovers, registers and asks to redirect.
let pendingTransport;
await step('connecting from only the /mcp URL ends in UnauthorizedError and a redirect to authorize', async () => {
  const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  const client = new Client({ name: 'unsay-oauth-e2e', version: '1' });
  try {
    await client.connect(transport);
    return 'connected without a token';
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) return 'not UnauthorizedError: ' + e;
  }
  pendingTransport = transport;
  if (!provider.authorizationUrl) return 'the SDK did not ask to redirect';
});
check('the SDK registered itself dynamically (RFC 7591)', provider.registrations === 1 && provider.info && provider.info.client_id,
  JSON.stringify(provider.info));
const authURL = provider.authorizationUrl ? new URL(provider.authorizationUrl) : new URL(base);
check('the authorization URL is the embedded server\'s, with PKCE S256 and the resource', authURL.origin === new URL(base).origin &&
  authURL.pathname === '/oauth/authorize' && authURL.searchParams.get('code_challenge_method') === 'S256' &&
  authURL.searchParams.get('resource') === mcpURL.href, authURL.href);

// 2. The consent page in Chromium: the link code, what is granted, Allow.
const browser = await chromium.launch({
  executablePath: env('CHROMIUM'), headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
let callback;
await step('Chromium: the consent page takes the link code and shows what is granted in plain words', async () => {
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 } }); // a carer's phone
  const page = await ctx.newPage();
  await page.route(REDIRECT + '**', (route) => { callback = new URL(route.request().url()); route.fulfill({ status: 200, body: 'back in the app' }); });
  await page.goto(authURL.href);
  const input = page.getByLabel('Six-digit code');
  if (!(await input.isVisible())) return 'no field labelled "Six-digit code"';
  const size = await page.evaluate(() => parseFloat(getComputedStyle(document.body).fontSize));
  if (size < 20) return `body text is ${size}px; want large type (≥ 20px)`;
  await page.screenshot({ path: join(artifacts, 'consent-code.png'), fullPage: true });
  await input.fill(linkCode);
  await page.getByRole('button', { name: 'Continue' }).click();
  try {
    await page.getByRole('button', { name: 'Allow', exact: true }).waitFor({ timeout: 15000 });
  } catch (e) {
    return 'no Allow button after the code; the page says: ' + (await page.locator('body').innerText());
  }
  const text = await page.locator('main').innerText();
  await page.screenshot({ path: join(artifacts, 'consent-confirm.png'), fullPage: true });
  if (!text.includes("Read Ray's care notes aloud")) return 'the page does not say "Read Ray\'s care notes aloud": ' + text;
  if (/reasoning/.test(text) && !/cannot[^.]*assistant/.test(text)) return 'an unapproved client is offered assistant-only notes: ' + text;
  if (leaked(text)) return 'assistant-only text on the consent page: ' + leaked(text);
  await page.getByRole('button', { name: 'Allow', exact: true }).click();
  for (let i = 0; i < 150 && !callback; i++) await new Promise((r) => setTimeout(r, 100));
  await ctx.close();
  if (!callback) return 'the browser was never sent back to the redirect URI';
});
await browser.close();
check('the authorization response carries the code, the state and iss (RFC 9207)', callback && callback.searchParams.get('code') &&
  callback.searchParams.get('state') === 'ts-e2e-state' && callback.searchParams.get('iss') === new URL(base).origin,
  callback ? callback.href : 'no callback');

// 3. The SDK exchanges the code (its finishAuth → auth()).
await step('finishAuth exchanges the code for an access and a refresh token', async () => {
  await pendingTransport.finishAuth(callback.searchParams.get('code'));
  const t = provider.tokens();
  if (!t || !t.access_token || !t.refresh_token) return 'tokens ' + JSON.stringify(t);
  if (/care\.read\.assistant|care\.write/.test(t.scope || '')) return 'granted more than care.read.user: ' + t.scope;
});

// 4. Ray's facts.
await step('the SDK client lists Ray\'s facts with its own token', async () => {
  const { client } = await connect();
  const all = [];
  let cursor;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    all.push(...page.resources.map((r) => r.uri));
    cursor = page.nextCursor;
  } while (cursor);
  await client.close();
  if (!all.includes('care://ray/weight_bearing')) return 'resources: ' + all.join(', ');
  if (all.some((u) => u.startsWith('care-internal://'))) return 'an assistant-only URI was listed: ' + all.join(', ');
});

// 5. A refresh, through the SDK's auth() with the stored refresh token.
await step('auth() refreshes: a new access token and a rotated refresh token', async () => {
  const before = provider.tokens();
  const result = await auth(provider, { serverUrl: mcpURL });
  const after = provider.tokens();
  if (result !== 'AUTHORIZED') return 'auth() = ' + result;
  if (after.access_token === before.access_token || after.refresh_token === before.refresh_token) return 'tokens did not change';
  const { client } = await connect();
  await client.listResources();
  await client.close();
});

// 6. The carer's revocation, then the next request.
await step('after `unsay grants revoke` the next request is 401 with error="invalid_token"', async () => {
  const list = execFileSync(unsay, ['grants', 'list', '--db', db, '--patient', 'ray'], { encoding: 'utf8' });
  const row = list.split('\n').find((l) => l.includes(provider.info.client_id));
  if (!row) return 'no grant listed for the client:\n' + list;
  const grant = row.trim().split(/\s+/)[0];
  execFileSync(unsay, ['grants', 'revoke', grant, '--db', db, '--by', 'carer'], { encoding: 'utf8' });
  const res = await fetch(mcpURL, {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + provider.tokens().access_token, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } } }),
  });
  const wa = res.headers.get('www-authenticate') || '';
  if (res.status !== 401 || !wa.includes('error="invalid_token"')) return `status ${res.status}, WWW-Authenticate ${wa}`;
  const refresh = await auth(provider, { serverUrl: mcpURL }).catch((e) => 'error: ' + e);
  if (refresh === 'AUTHORIZED') return 'the revoked grant refreshed';
});

done();
