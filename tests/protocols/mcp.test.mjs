// MCP against a real wardend, driven by unmodified third-party clients from
// npm: the official SDK's Client over stdio (`warden mcp`) and over
// Streamable HTTP (wardend --http-listen, /mcp), and the MCP conformance
// suite's server scenarios. Then bad input, which must get MCP's errors and
// leave the daemon serving.
//
//   WARDEN_BIN_DIR=build/bin node --test tests/protocols/mcp.test.mjs
//
// Needs root like every daemon test (wardend builds sandboxes), and the npm
// packages of package.json (`make test-deps`).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const binDir = process.env.WARDEN_BIN_DIR ?? path.resolve(here, '../../build/bin');
const START_DEADLINE_MS = 120_000;

// One wardend for the whole file: a UNIX socket for gRPC (what `warden mcp`
// connects to) and the HTTP front on a free loopback port, no tokens.
class Wardend {
  async start() {
    this.dir = fs.mkdtempSync('/tmp/warden_mcp_');
    this.socket = `unix:${this.dir}/w.sock`;
    const config = {
      allow_insecure_loopback: true,
      http_listen: '127.0.0.1:0',
      pools: [{ language: 'python', size: 1, warm: [] }, { language: 'bash', size: 0 }],
      // Small file and code caps keep the body limit (and the oversized test) small.
      limits: { max_code_bytes: 65536, max_file_bytes: 1 << 20 },
      // A host id range of its own, so no other wardend maps the same uids.
      executor: { host_id_base: 9_000_000 + (process.pid % 4096) * 512, host_id_count: 512 },
      shutdown_grace_ms: 2000,
    };
    fs.writeFileSync(`${this.dir}/wardend.json`, JSON.stringify(config));
    this.log = '';
    this.process = spawn(`${binDir}/wardend`, ['--config', `${this.dir}/wardend.json`, '--listen', this.socket],
                         { stdio: ['ignore', 'ignore', 'pipe'] });
    this.process.stderr.on('data', (chunk) => { this.log += chunk; });
    this.port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`wardend did not start its HTTP front:\n${this.log}`)),
                               START_DEADLINE_MS);
      const check = () => {
        const m = /HTTP front \(MCP at \/mcp\) on port (\d+)/.exec(this.log);
        if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      };
      this.process.stderr.on('data', check);
      this.process.on('exit', (code) => { clearTimeout(timer); reject(new Error(`wardend exited (${code}):\n${this.log}`)); });
      check();
    });
    this.url = `http://127.0.0.1:${this.port}/mcp`;
  }

  async stop() {
    if (!this.process || this.process.exitCode !== null) return this.process?.exitCode;
    const exited = new Promise((resolve) => this.process.on('exit', (code) => resolve(code)));
    this.process.kill('SIGTERM');
    const code = await exited;
    fs.rmSync(this.dir, { recursive: true, force: true });
    return code;
  }
}

const wardend = new Wardend();
before(async () => { await wardend.start(); });
after(async () => {
  const code = await wardend.stop();
  assert.equal(code, 0, `wardend should exit 0 after SIGTERM:\n${wardend.log}`);
});

function text(result) {
  return result.content.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

// The same checks over each transport.
const transports = {
  stdio: () => new StdioClientTransport({
    command: `${binDir}/warden`, args: ['mcp'], env: { ...process.env, WARDEN_ADDR: wardend.socket }, stderr: 'inherit',
  }),
  'streamable HTTP': () => new StreamableHTTPClientTransport(new URL(wardend.url)),
};

for (const [name, makeTransport] of Object.entries(transports)) {
  describe(`the SDK Client over ${name}`, () => {
    let client;
    before(async () => {
      client = new Client({ name: 'warden-test', version: '1.0.0' });
      await client.connect(makeTransport());
    });
    after(async () => { await client.close(); });

    test('negotiates the protocol and names the server', () => {
      assert.equal(client.getServerVersion().name, 'warden');
      assert.ok(client.getServerCapabilities().tools);
    });

    test('lists the tools with their schemas', async () => {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['close_session', 'create_session', 'download_file', 'execute_code',
                               'interrupt_session', 'list_files', 'restart_session', 'upload_file']);
      const exec = tools.find((t) => t.name === 'execute_code');
      assert.deepEqual(exec.inputSchema.required, ['code']);
      assert.ok(exec.outputSchema.properties.outcome);
      assert.match(exec.description, /one-shot/);
      assert.match(exec.description, /session_id/);
    });

    test('runs code one-shot, with the value and structuredContent', async () => {
      const result = await client.callTool({ name: 'execute_code', arguments: { code: 'print("hi")\n6 * 7' } });
      assert.ok(!result.isError, JSON.stringify(result));
      assert.match(text(result), /hi/);
      assert.match(text(result), /42/);
      assert.equal(result.structuredContent.outcome, 'ok');
      assert.equal(result.structuredContent.stdout, 'hi\n');
      assert.equal(result.structuredContent.results.at(-1).data['text/plain'], '42');
    });

    test('runs JavaScript and bash too', async () => {
      const js = await client.callTool({ name: 'execute_code', arguments: { code: 'console.log(1 + 1)', language: 'javascript' } });
      assert.equal(js.structuredContent.stdout.trim(), '2');
      const sh = await client.callTool({ name: 'execute_code', arguments: { code: 'echo $((2 + 3))', language: 'bash' } });
      assert.equal(sh.structuredContent.stdout.trim(), '5');
    });

    test('keeps variables and files in a session, and nothing one-shot', async () => {
      const created = await client.callTool({ name: 'create_session', arguments: { language: 'python' } });
      const id = created.structuredContent.session_id;
      assert.ok(id);
      try {
        await client.callTool({ name: 'execute_code', arguments: { code: 'x = 41\nopen("note.txt", "w").write("kept")', session_id: id } });
        const again = await client.callTool({ name: 'execute_code', arguments: { code: 'x + 1', session_id: id } });
        assert.equal(again.structuredContent.results.at(-1).data['text/plain'], '42');
        const files = await client.callTool({ name: 'list_files', arguments: { session_id: id } });
        assert.ok(files.structuredContent.files.some((f) => f.path === 'note.txt'), JSON.stringify(files));
        const oneShot = await client.callTool({ name: 'execute_code', arguments: { code: 'x' } });
        assert.equal(oneShot.isError, true);
        assert.equal(oneShot.structuredContent.error.name, 'NameError');
      } finally {
        await client.callTool({ name: 'close_session', arguments: { session_id: id } });
      }
    });

    test('returns a matplotlib plot as a PNG image block', async () => {
      const code = 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n' +
                   'plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()';
      const result = await client.callTool({ name: 'execute_code', arguments: { code } });
      assert.ok(!result.isError, JSON.stringify(result).slice(0, 2000));
      const image = result.content.find((b) => b.type === 'image');
      assert.ok(image, JSON.stringify(result).slice(0, 2000));
      assert.equal(image.mimeType, 'image/png');
      assert.equal(Buffer.from(image.data, 'base64').subarray(1, 4).toString(), 'PNG');
    });

    test('reports an exception as isError with the name, value and traceback', async () => {
      const result = await client.callTool({ name: 'execute_code', arguments: { code: 'def f():\n    return 1 / 0\nf()' } });
      assert.equal(result.isError, true);
      assert.match(text(result), /ZeroDivisionError: division by zero/);
      assert.match(text(result), /Traceback|line 2/);
      assert.equal(result.structuredContent.outcome, 'error');
    });

    test('reports a limit as isError', async () => {
      const result = await client.callTool({ name: 'execute_code', arguments: { code: 'while True: pass', timeout_ms: 500 } });
      assert.equal(result.isError, true);
      assert.equal(result.structuredContent.outcome, 'wall_timeout');
    });

    test('streams output as progress notifications when asked', async () => {
      // The cell prints, then waits for a gate file that only the first
      // progress notification opens: without streaming it would wait out
      // its 20 s and nothing would be seen.
      const { structuredContent: { session_id } } = await client.callTool({ name: 'create_session', arguments: {} });
      try {
        const seen = [];
        let opened = null;
        const result = await client.callTool(
          { name: 'execute_code', arguments: { session_id, code:
            'import os, time\nprint(0, flush=True)\ndeadline = time.time() + 20\n' +
            'while not os.path.exists("gate") and time.time() < deadline:\n    time.sleep(0.01)\n' +
            'print(1, flush=True)\nprint(2, flush=True)' } },
          undefined, { onprogress: (p) => {
            seen.push(p.message);
            opened ??= client.callTool({ name: 'upload_file', arguments: { session_id, path: 'gate', content_base64: '' } });
          } });
        await opened;
        assert.equal(result.structuredContent.stdout, '0\n1\n2\n');
        assert.ok(seen.length >= 1, 'no progress notification arrived');
        // The SDK runs notification handlers a tick after it settles the
        // response, so chunks that come with the response can miss
        // onprogress: what arrived must be the output's beginning, in order.
        assert.ok('0\n1\n2\n'.startsWith(seen.join('')), JSON.stringify(seen));
      } finally {
        await client.callTool({ name: 'close_session', arguments: { session_id } });
      }
    });

    test('moves files in and out of a session', async () => {
      const { structuredContent: { session_id } } = await client.callTool({ name: 'create_session', arguments: {} });
      try {
        const up = await client.callTool({ name: 'upload_file',
          arguments: { session_id, path: 'data/in.txt', content_base64: Buffer.from('hello file').toString('base64') } });
        assert.ok(!up.isError, JSON.stringify(up));
        const run = await client.callTool({ name: 'execute_code',
          arguments: { session_id, code: 'open("data/in.txt").read().upper()' } });
        assert.equal(run.structuredContent.results.at(-1).data['text/plain'], "'HELLO FILE'");
        const down = await client.callTool({ name: 'download_file', arguments: { session_id, path: 'data/in.txt' } });
        const resource = down.content.find((b) => b.type === 'resource').resource;
        assert.equal(Buffer.from(resource.blob, 'base64').toString(), 'hello file');
        assert.equal(resource.mimeType, 'text/plain');
      } finally {
        await client.callTool({ name: 'close_session', arguments: { session_id } });
      }
    });

    test('an unknown session is a tool error the model can act on', async () => {
      const result = await client.callTool({ name: 'execute_code', arguments: { code: '1', session_id: 'no-such-session' } });
      assert.equal(result.isError, true);
      assert.match(text(result), /NOT_FOUND/);
      assert.match(text(result), /create_session/);
    });

    test('an unknown tool and bad arguments are JSON-RPC errors', async () => {
      await assert.rejects(client.callTool({ name: 'rm_rf', arguments: {} }), /unknown tool 'rm_rf'/);
      await assert.rejects(client.callTool({ name: 'execute_code', arguments: {} }), /'code' is required/);
      await assert.rejects(client.callTool({ name: 'execute_code', arguments: { code: '1', language: 'cobol' } }),
                           /unknown language 'cobol'/);
    });
  });
}

// Raw HTTP, for what the SDK never sends.
async function post(body, headers = {}) {
  const res = await fetch(wardend.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  const raw = await res.text();
  let json = null;
  try { json = JSON.parse(raw); } catch {}
  return { status: res.status, json, raw };
}

describe('Streamable HTTP bad input', () => {
  test('malformed JSON is a JSON-RPC parse error', async () => {
    const r = await post('{"jsonrpc": "2.0", "id": 1, "method": ');
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, -32700);
  });

  test('a body over the limit is refused before it is read', async () => {
    // The daemon's limits make the /mcp body limit about 2.4 MB.
    const big = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(4 << 20) } }));
    assert.equal(big.status, 413);
    assert.match(big.json.error.message, /exceeds \d+ bytes/);
  });

  test('a notification alone gets 202 and no body', async () => {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    assert.equal(r.status, 202);
    assert.equal(r.raw, '');
  });

  test('an unknown method is -32601, not a crash', async () => {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'resources/list', params: {} }));
    assert.equal(r.status, 200);
    assert.equal(r.json.id, 7);
    assert.equal(r.json.error.code, -32601);
  });

  test('a foreign Origin is refused (DNS rebinding)', async () => {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { Origin: 'http://evil.example' });
    assert.equal(r.status, 403);
    assert.match(r.json.error.message, /Origin/);
    const ok = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { Origin: 'http://localhost:5173' });
    assert.equal(ok.status, 200);
  });

  test('GET /mcp is 405: no server-initiated stream', async () => {
    const res = await fetch(wardend.url, { headers: { Accept: 'text/event-stream' } });
    assert.equal(res.status, 405);
  });

  test('the daemon still serves afterwards', async () => {
    const r = await post(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }));
    assert.deepEqual(r.json, { jsonrpc: '2.0', id: 9, result: {} });
    const health = await fetch(`http://127.0.0.1:${wardend.port}/healthz`);
    assert.equal(await health.text(), 'ok\n');
  });
});

describe('the MCP conformance suite (@modelcontextprotocol/conformance 0.1.13)', () => {
  const cli = path.join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
  for (const scenario of ['server-initialize', 'tools-list', 'ping', 'dns-rebinding-protection']) {
    test(scenario, async () => {
      const { stdout } = await promisify(execFile)(
        process.execPath, [cli, 'server', '--url', wardend.url, '--scenario', scenario], { timeout: 120_000 })
        .catch((e) => { throw new Error(`conformance ${scenario} failed:\n${e.stdout}\n${e.stderr}`); });
      assert.match(stdout, /0 failed/, stdout);
    });
  }
});
