// A loopback reverse proxy that adds a bearer token to every request and
// otherwise forwards it untouched — method, path, every header (Host and
// Origin included, so the server's DNS-rebinding checks judge what the
// client sent) and the body, streamed both ways so SSE frames pass as they
// come. Part 2 puts it in front of the server for the MCP conformance suite,
// which has no way to send a token itself.
//
//   node bearer-proxy.mjs
//
// It listens on 127.0.0.1 (a free port), prints "LISTENING <port>", then
// reads one line "TARGET_BASE_URL TOKEN" from stdin before it forwards
// anything (so the server can be started with the proxy's URL as its public
// URL first). It runs until killed or until stdin closes.
import http from 'node:http';
import readline from 'node:readline';

let target;
let token = '';
const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  if (!target) {
    res.writeHead(503, { 'content-type': 'text/plain' });
    res.end('bearer proxy: no target yet');
    return;
  }
  const headers = { ...req.headers, authorization: 'Bearer ' + token };
  const up = http.request({
    host: target.hostname, port: target.port, method: req.method, path: req.url, headers, agent,
  }, (ur) => {
    res.writeHead(ur.statusCode, ur.rawHeaders);
    res.flushHeaders();
    ur.pipe(res);
  });
  up.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('bearer proxy: ' + e.message);
  });
  res.on('close', () => up.destroy());
  req.pipe(up);
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write('LISTENING ' + server.address().port + '\n');
});

const rl = readline.createInterface({ input: process.stdin });
rl.once('line', (line) => {
  const [url, tok] = line.trim().split(/\s+/);
  target = new URL(url);
  token = tok || '';
  process.stdout.write('TARGET ' + target.origin + '\n');
});
rl.on('close', () => process.exit(0));
