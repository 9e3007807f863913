// The unmodified E2B SDKs from npm (@e2b/code-interpreter 2.8, e2b 2.51)
// against a real wardend's HTTP front, configured the way a user would:
// only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. Run by ctest
// (e2b_sdk) with WARDEN_BIN_DIR; needs root, like every sandbox test.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

const binDir = process.env.WARDEN_BIN_DIR ?? new URL('../../build/bin', import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), 'warden-e2b-'));
let daemon;
let base;
let Sandbox;
const KEY = 'e2b_0123456789abcdef0123456789abcdef';

// Waits, until a deadline, for wardend to log the HTTP front's port.
function waitForPort(log, child, deadlineMs) {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`wardend did not start its HTTP front:\n${text}`)), deadlineMs);
    const onData = (chunk) => {
      text += chunk;
      const m = text.match(/HTTP front[^\n]* on port (\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`wardend exited with ${code}:\n${text}`));
    });
  });
}

before(async () => {
  // A tenant's token, shaped as E2B's SDKs want their API keys.
  const tokens = join(tmp, 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ tokens: [{ token: KEY, tenant: 'e2b-test' }] }), { mode: 0o600 });
  const config = join(tmp, 'wardend.json');
  writeFileSync(config, JSON.stringify({
    auth: { tokens_file: tokens },
    executor: { host_id_base: 7_000_000 + (process.pid % 4096) * 1024, host_id_count: 1024 },
  }));
  daemon = spawn(join(binDir, 'wardend'),
    ['--config', config, '--listen', `unix:${join(tmp, 'w.sock')}`, '--http-listen', '127.0.0.1:0'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await waitForPort('', daemon, 60_000);
  base = `http://127.0.0.1:${port}`;
  // The whole configuration, as a user sets it.
  process.env.E2B_API_URL = base;
  process.env.E2B_SANDBOX_URL = base;
  process.env.E2B_API_KEY = KEY;
  try {
    ({ Sandbox } = await import('@e2b/code-interpreter'));
  } catch (e) {
    throw new Error(`the E2B SDK is not installed in tests/e2b: run \`make test-deps\` (${e.message})`);
  }
});

after(async () => {
  if (daemon && daemon.exitCode === null) {
    const exited = new Promise((resolve) => daemon.on('exit', resolve));
    daemon.kill('SIGTERM');
    await exited;
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe('E2B SDK against Warden', () => {
  test('runCode keeps state across calls, and reports values, plots and errors', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.runCode('x = 41');
      const value = await sbx.runCode('x + 1');
      assert.equal(value.text, '42');
      assert.equal(value.results[0].isMainResult, true);
      assert.equal(value.executionCount, 2);

      const plot = await sbx.runCode(
        'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()');
      const png = plot.results.find((r) => r.png);
      assert.ok(png, `no png among ${JSON.stringify(plot.results.map((r) => r.formats()))}`);
      assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG');

      const failed = await sbx.runCode('1 / 0');
      assert.equal(failed.error.name, 'ZeroDivisionError');
      assert.equal(failed.error.value, 'division by zero');
      assert.match(failed.error.traceback, /ZeroDivisionError/);
    } finally {
      await sbx.kill();
    }
  });

  test('streaming callbacks see output as it comes', async () => {
    const sbx = await Sandbox.create();
    try {
      const out = [], err = [], results = [];
      await sbx.runCode('import sys\nprint("a")\nprint("b", file=sys.stderr)\n7', {
        onStdout: (m) => out.push(m.line),
        onStderr: (m) => err.push(m.line),
        onResult: (r) => results.push(r.text),
      });
      assert.equal(out.join(''), 'a\n');
      assert.equal(err.join(''), 'b\n');
      assert.deepEqual(results, ['7']);
    } finally {
      await sbx.kill();
    }
  });

  test('contexts in two languages share the files', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.runCode("open('/home/user/shared.txt', 'w').write('from python')");
      const js = await sbx.createCodeContext({ language: 'js' });
      const read = await sbx.runCode("require('fs').readFileSync('shared.txt', 'utf8')", { context: js });
      assert.match(read.text, /from python/);
      const byLanguage = await sbx.runCode('1 + 1', { language: 'javascript' });
      assert.equal(byLanguage.text, '2');
      const contexts = await sbx.listCodeContexts();
      assert.ok(contexts.some((c) => c.id === js.id));
      await sbx.restartCodeContext(js);
      await sbx.removeCodeContext(js);
    } finally {
      await sbx.kill();
    }
  });

  test('files written and read through the SDK are the code\'s files', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.files.write('/home/user/in.txt', 'hello');
      const r = await sbx.runCode("open('in.txt').read().upper()");
      assert.equal(r.text, "'HELLO'");
      await sbx.runCode("open('out.bin', 'wb').write(bytes(range(256)))");
      const bytes = await sbx.files.read('/home/user/out.bin', { format: 'bytes' });
      assert.equal(bytes.length, 256);
      assert.equal(bytes[255], 255);
    } finally {
      await sbx.kill();
    }
  });

  test('kill, connect, setTimeout and list follow E2B', async () => {
    const sbx = await Sandbox.create({ timeoutMs: 60_000, metadata: { owner: 'test' } });
    await sbx.setTimeout(120_000);
    const listed = await Sandbox.list().nextItems();
    assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId));
    const again = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await again.runCode('6 * 7')).text, '42');
    await sbx.kill();
    await assert.rejects(() => sbx.runCode('1'));
  });

  test('what Warden does not do is refused with a clear error', async () => {
    await assert.rejects(() => Sandbox.create('my-template'), /Warden serves the template 'code-interpreter-v1'/);
    await assert.rejects(() => Sandbox.create({ allowInternetAccess: true }), /no internet access/);
  });

  test('bad input gets E2B\'s error shape and the daemon keeps serving', async () => {
    const post = (path, body, headers = {}) => fetch(`${base}${path}`, {
      method: 'POST', body, headers: { 'Content-Type': 'application/json', 'X-API-KEY': process.env.E2B_API_KEY, ...headers },
    });
    let r = await post('/v2/sandboxes', '{not json');
    assert.equal(r.status, 400);
    assert.match((await r.json()).message, /JSON/);
    r = await post('/execute', JSON.stringify({ code: '1' }), { 'E2b-Sandbox-Id': 's-000000000000000000000000' });
    assert.equal(r.status, 404);
    assert.equal((await r.json()).code, 404);
    r = await post('/execute', 'x'.repeat(200 << 20), { 'E2b-Sandbox-Id': 's-0' });
    assert.equal(r.status, 413);
    r = await fetch(`${base}/sandboxes/s-000000000000000000000000`, { method: 'DELETE', headers: { 'X-API-KEY': process.env.E2B_API_KEY } });
    assert.equal(r.status, 404);
    r = await fetch(`${base}/v2/sandboxes`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 401);
    assert.match((await r.json()).message, /X-API-KEY/);
    r = await post('/v2/sandboxes', '{}', { 'X-API-KEY': 'e2b_ffffffffffffffffffffffffffff' });
    assert.equal(r.status, 401);
    // Still serving.
    const sbx = await Sandbox.create();
    assert.equal((await sbx.runCode('2 + 2')).text, '4');
    await sbx.kill();
  });
});
