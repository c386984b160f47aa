// The Echo Show card as an MCP Apps view (io.modelcontextprotocol/ui,
// 2026-01-26) inside a host's sandboxed iframe, in Debian's headless
// Chromium — what Alexa+'s webview does with ui://unsay/echo. The host side
// is played here: the official MCP TypeScript SDK client holds the MCP
// session (a reader token), reads the view's HTML over MCP, renders it in
// <iframe sandbox="allow-scripts" srcdoc>, answers ui/initialize (with
// serverTools), sends the tool result of care_instruction, and proxies
// the view's tools/call to the server.
//
// env: UNSAY_E2E_URL, CHROMIUM, TOKEN_READER (care.read.user), WRITE_SECRET,
// ARTIFACTS (screenshot dir).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { step, done, env, leaked, signedWrite, waitFor } from './lib.mjs';

const base = env('UNSAY_E2E_URL');
const reader = env('TOKEN_READER');
const secret = env('WRITE_SECRET');
const artifacts = env('ARTIFACTS');
mkdirSync(artifacts, { recursive: true });
const REVISION = 'Full weight-bearing as tolerated; walk outdoors with one crutch (e2e MCP Apps).';

const transport = new StreamableHTTPClientTransport(new URL(base + '/mcp'), {
  requestInit: { headers: { Authorization: 'Bearer ' + reader } },
});
const mcp = new Client({ name: 'e2e MCP Apps host', version: '1.0.0' }, { capabilities: {} });
await mcp.connect(transport);

let html = '';
await step('the view ui://unsay/echo is read over MCP as text/html;profile=mcp-app with a CSP that allows no network', async () => {
  const r = await mcp.readResource({ uri: 'ui://unsay/echo' });
  const c = r.contents[0];
  if (c.mimeType !== 'text/html;profile=mcp-app') return 'mime ' + c.mimeType;
  const csp = c._meta && c._meta.ui && c._meta.ui.csp;
  if (!csp || !Array.isArray(csp.connectDomains) || csp.connectDomains.length !== 0) return 'csp ' + JSON.stringify(c._meta);
  html = c.text;
  const page = await (await fetch(base + '/echo.html')).text();
  if (html !== page) return 'the view is not the bytes of /echo.html (P-16)';
});

let tool;
await step('care_instruction links the view in _meta.ui.resourceUri', async () => {
  tool = (await mcp.listTools()).tools.find((t) => t.name === 'care_instruction');
  if (!tool || !tool._meta || !tool._meta.ui || tool._meta.ui.resourceUri !== 'ui://unsay/echo') return JSON.stringify(tool);
});

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const ctx = await browser.newContext({ viewport: { width: 1000, height: 540 } });
const page = await ctx.newPage();
const errors = [];
const requests = [];
page.on('pageerror', (e) => errors.push(String(e)));
ctx.on('request', (r) => requests.push(r.url()));
const proxied = [];
// The host proxies the view's tools/call to the MCP server (serverTools).
await page.exposeFunction('hostCallTool', async (params) => {
  proxied.push(params.name);
  return await mcp.callTool(params);
});
await page.setContent(`<!doctype html><html><body style="margin:0">
<iframe id="view" sandbox="allow-scripts" style="border:0;width:960px;height:480px"></iframe>
<script>
  window.fromView = [];
  const view = document.getElementById('view');
  window.addEventListener('message', async (e) => {
    if (e.source !== view.contentWindow) return;
    const m = e.data;
    window.fromView.push(m && m.method);
    const reply = (x) => view.contentWindow.postMessage(Object.assign({ jsonrpc: '2.0', id: m.id }, x), '*');
    if (m.method === 'ui/initialize') {
      reply({ result: { protocolVersion: '2026-01-26', hostInfo: { name: 'e2e-host', version: '1' },
        hostCapabilities: { serverTools: {} }, hostContext: { theme: 'light', displayMode: 'inline' } } });
    } else if (m.method === 'tools/call') {
      try { reply({ result: await window.hostCallTool(m.params) }); }
      catch (err) { reply({ error: { code: -32603, message: String(err) } }); }
    } else if (m.id != null && m.method) {
      reply({ error: { code: -32601, message: 'Method not found' } });
    }
  });
  window.toolResult = (result) => view.contentWindow.postMessage({ jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: result }, '*');
</script></body></html>`);
await page.evaluate((h) => { document.getElementById('view').srcdoc = h; }, html);
const frame = await (await page.waitForSelector('#view')).contentFrame();

await step('the view initializes with the host (ui/initialize, then ui/notifications/initialized)', async () => {
  await waitFor(async () => (await page.evaluate(() => window.fromView)).includes('ui/notifications/initialized'), 10000, 'initialized');
  if (await frame.isVisible('[data-testid="no-token"]')) return 'the view asks for a link inside a host';
});

await step('the tool result renders the current walking instruction in the view', async () => {
  const result = await mcp.callTool({ name: 'care_instruction', arguments: { topic: 'walking' } });
  await page.evaluate((r) => window.toolResult(r), result);
  await frame.waitForSelector('[data-testid="fact-row"][data-uri="care://ray/weight_bearing"]', { timeout: 10000 });
  const row = await frame.textContent('[data-testid="fact-row"][data-uri="care://ray/weight_bearing"]');
  if (!row.includes('Full weight-bearing as tolerated.')) return 'row: ' + row;
});

await step('a revision written while the view is open is drawn as the retraction (whats_changed through the host)', async () => {
  const w = await signedWrite(base, secret, { patient: 'ray', domain: 'weight_bearing', audience: 'user', value: REVISION,
    authorId: 'okafor', authorLabel: 'Sarah Okafor, physio' });
  if (w.status !== 201) return 'write ' + w.status + ' ' + w.text;
  await frame.waitForSelector('[data-testid="retraction"]:not([hidden])', { timeout: 45000 });
  const stop = await frame.textContent('[data-testid="retraction"]');
  if (!stop.includes('Stop — your walking instruction has changed.') || !stop.includes(REVISION)) return 'retraction: ' + stop;
  if (!proxied.includes('whats_changed')) return 'the view did not ask whats_changed through the host: ' + JSON.stringify(proxied);
  await page.screenshot({ path: join(artifacts, 'echo-mcp-apps-host.png') });
});

await step('inside the host the view made no network request of its own and holds no assistant-only text', async () => {
  const own = requests.filter((u) => !u.startsWith('about:') && !u.startsWith('data:'));
  if (own.length) return 'requests: ' + JSON.stringify(own);
  const dom = await frame.content();
  if (leaked(dom)) return 'assistant-only content: ' + leaked(dom);
  if (errors.length) return 'page errors: ' + errors.join('; ');
});

await browser.close();
await mcp.close();
done();
