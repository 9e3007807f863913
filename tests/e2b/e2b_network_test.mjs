// The E2B SDK's network calls, unmodified, against a wardend with egress on
// (issue #30): allowInternetAccess, network.allowOut/denyOut, rules with
// header transforms, updateNetwork, getHost, allowPublicTraffic,
// maskRequestHost, and autoResume on a request to a port. Run by
// tests/network/network_test.py, inside its network namespaces, against its
// wardend and its internet (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set;
// WARDEN_HTTP_PORT the HTTP front's port, WARDEN_RECORDER the
// header-recording server's address). The hosts are the test's: one.test
// and connectivitycheck.gstatic.com at 1.1.1.1, dns.test at 8.8.8.8,
// api.test records headers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

const { Sandbox, CommandExitError, ALL_TRAFFIC } = await import('e2b');
const port = Number(process.env.WARDEN_HTTP_PORT);

async function withSandbox(opts, body) {
  const sandbox = await Sandbox.create({ timeoutMs: 120_000, ...opts });
  try {
    await body(sandbox);
  } finally {
    await sandbox.kill().catch(() => {});
  }
}

async function status(sandbox, url) {
  const r = await sandbox.commands.run(`curl -s -o /dev/null -w '%{http_code}' ${url}`);
  return r.stdout.trim();
}

async function refused(sandbox, url) {
  await assert.rejects(sandbox.commands.run(`curl --connect-timeout 3 --max-time 5 -Is ${url}`),
                       (e) => e instanceof CommandExitError && e.exitCode !== 0);
}

// A request to the HTTP front for `host` (an exposed port's name).
function get(host, headers = {}, path = '/') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function serve(sandbox, portNumber, code) {
  await sandbox.commands.run(code ?? `python3 -m http.server ${portNumber}`, { background: true });
  await sandbox.commands.run(`for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/${portNumber}) 2>/dev/null && exit 0; sleep 0.1; done; exit 1`);
}

test('internet access by default, within the operator\'s ceiling', async () => {
  await withSandbox({}, async (sandbox) => {
    assert.equal(await status(sandbox, 'https://connectivitycheck.gstatic.com/generate_204'), '204');
    const info = await Sandbox.getInfo(sandbox.sandboxId);
    assert.equal(info.allowInternetAccess, true);
  });
});

test('allowInternetAccess: false has no internet', async () => {
  await withSandbox({ allowInternetAccess: false }, async (sandbox) => {
    await refused(sandbox, 'https://connectivitycheck.gstatic.com/generate_204');
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId)).allowInternetAccess, false);
  });
});

test('allowOut beats a denyOut of all traffic', async () => {
  await withSandbox({ network: { denyOut: ({ allTraffic }) => [allTraffic], allowOut: ['1.1.1.1'] } }, async (sandbox) => {
    assert.equal(await status(sandbox, 'https://1.1.1.1/generate_204'), '204');
    await refused(sandbox, 'https://8.8.8.8');
    const info = await Sandbox.getInfo(sandbox.sandboxId);
    assert.deepEqual(info.network.allowOut, ['1.1.1.1']);
    assert.deepEqual(info.network.denyOut, [ALL_TRAFFIC]);
  });
});

test('denyOut one address, the rest allowed', async () => {
  await withSandbox({ network: { denyOut: ['8.8.8.8'] } }, async (sandbox) => {
    await refused(sandbox, 'https://8.8.8.8');
    assert.equal(await status(sandbox, 'https://1.1.1.1/generate_204'), '204');
  });
});

test('updateNetwork replaces the rules, and an empty update clears them', async () => {
  await withSandbox({}, async (sandbox) => {
    assert.equal(await status(sandbox, 'https://8.8.8.8/'), '200');
    await sandbox.updateNetwork({ denyOut: ['8.8.8.8'] });
    await refused(sandbox, 'https://8.8.8.8');
    assert.equal(await status(sandbox, 'https://1.1.1.1/generate_204'), '204');
    await sandbox.updateNetwork({});
    assert.equal(await status(sandbox, 'https://8.8.8.8/'), '200');
  });
});

test('rules transform headers on the way out', async () => {
  const opts = {
    network: {
      allowOut: ({ rules }) => [...rules.keys()],
      denyOut: [ALL_TRAFFIC],
      rules: { 'api.test': [{ transform: { headers: { 'X-Test-Token': 'e2b-transform-value-123' } } }] },
    },
  };
  await withSandbox(opts, async (sandbox) => {
    const r = await sandbox.commands.run('curl -sS https://api.test/headers');
    assert.equal(JSON.parse(r.stdout).headers['X-Test-Token'], 'e2b-transform-value-123');
    await refused(sandbox, 'https://one.test/');
    // What getInfo shows hides the value.
    const info = await Sandbox.getInfo(sandbox.sandboxId);
    assert.deepEqual(Object.keys(info.network.rules), ['api.test']);
    assert.notEqual(JSON.stringify(info.network.rules).includes('e2b-transform-value-123'), true);
  });
});

test('getHost reaches a server in the sandbox; public by default', async () => {
  await withSandbox({}, async (sandbox) => {
    await serve(sandbox, 8000);
    const host = sandbox.getHost(8000);
    assert.equal(host, `8000-${sandbox.sandboxId}.sandbox.test`);
    assert.equal((await get(host)).status, 200);
  });
});

test('allowPublicTraffic: false needs the traffic access token', async () => {
  await withSandbox({ network: { allowPublicTraffic: false } }, async (sandbox) => {
    assert.ok(sandbox.trafficAccessToken);
    await serve(sandbox, 8080);
    const host = sandbox.getHost(8080);
    assert.equal((await get(host)).status, 403);
    assert.equal((await get(host, { 'e2b-traffic-access-token': sandbox.trafficAccessToken })).status, 200);
  });
});

test('maskRequestHost is the Host the sandbox\'s server sees', async () => {
  await withSandbox({ network: { maskRequestHost: 'custom-host.example.com:${PORT}' } }, async (sandbox) => {
    await serve(sandbox, 8081, `python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.headers['Host'].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(('', 8081), H).serve_forever()
"`);
    const r = await get(sandbox.getHost(8081));
    assert.equal(r.body, 'custom-host.example.com:8081');
  });
});

test('a sandbox that ended answers 502 "The sandbox was not found"', async () => {
  const sandbox = await Sandbox.create();
  const host = sandbox.getHost(3000);
  await sandbox.kill();
  const r = await get(host);
  assert.equal(r.status, 502);
  const body = JSON.parse(r.body);
  assert.equal(body.message, 'The sandbox was not found');
  assert.equal(body.code, 502);
  assert.ok(sandbox.sandboxId.startsWith(body.sandboxId));
});

test('autoResume: a request to a paused sandbox\'s port resumes it; without autoResume it stays paused', async () => {
  const [resumable, plain] = await Promise.all([
    Sandbox.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true },
                     network: { allowPublicTraffic: false } }),
    Sandbox.create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause' } }),
  ]);
  try {
    await Promise.all([serve(resumable, 8000), serve(plain, 8000)]);
    assert.deepEqual(await Promise.all([resumable.pause(), plain.pause()]), [true, true]);
    const token = { 'e2b-traffic-access-token': resumable.trafficAccessToken };
    // Who may not reach its ports does not resume it either.
    assert.equal((await get(resumable.getHost(8000))).status, 403);
    assert.equal((await Sandbox.getInfo(resumable.sandboxId)).state, 'paused');
    // The path form and the name form both resume it, then relay.
    const r = await get('127.0.0.1', token, `/ports/${resumable.sandboxId}/8000/`);
    assert.equal(r.status, 200, r.body);
    assert.match(r.body, /Directory listing/);
    assert.equal((await Sandbox.getInfo(resumable.sandboxId)).state, 'running');
    assert.equal((await get(resumable.getHost(8000), token)).status, 200);
    // Without autoResume the request is refused as E2B refuses it (502), and
    // the sandbox stays paused.
    const p = await get(plain.getHost(8000));
    assert.equal(p.status, 502, p.body);
    assert.match(JSON.parse(p.body).message, /is paused: resume it first .*autoResume/);
    assert.equal((await Sandbox.getInfo(plain.sandboxId)).state, 'paused');
  } finally {
    await Promise.all([resumable.kill().catch(() => {}), plain.kill().catch(() => {})]);
  }
});
