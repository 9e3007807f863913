// The unmodified E2B SDKs from npm (@e2b/code-interpreter 2.8, e2b 2.51)
// against a real wardend's HTTP front, configured the way a user would:
// only E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. Run by ctest
// (e2b_sdk) with WARDEN_BIN_DIR; needs root, like every sandbox test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KEY, importSdk, startWardend } from './wardend.mjs';

let wardend;
let base;
let Sandbox;
let CommandExitError;

before(async () => {
  wardend = await startWardend({ idBase: 7_000_000 });
  base = wardend.base;
  ({ Sandbox, CommandExitError } = await importSdk());
});

after(async () => {
  if (wardend) await wardend.stop();
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
      assert.equal(r.text, 'HELLO');  // unquoted, as from E2B's server
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
    // A template Warden has not imported (docs/templates.md): the error
    // says how to make one.
    await assert.rejects(() => Sandbox.create('my-template'),
      /there is no template 'my-template' \(there are none yet: warden template import\)/);
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

  test('commands.run streams output and reports exit codes (envd process.Process)', async () => {
    const sbx = await Sandbox.create();
    try {
      const out = [], err = [];
      const done = await sbx.commands.run('echo one; echo two >&2; echo three', {
        onStdout: (d) => out.push(d),
        onStderr: (d) => err.push(d),
      });
      assert.equal(done.exitCode, 0);
      assert.equal(done.stdout, 'one\nthree\n');
      assert.equal(done.stderr, 'two\n');
      assert.equal(out.join(''), 'one\nthree\n');
      assert.equal(err.join(''), 'two\n');
      // envs and cwd reach the command; the working directory is /home/user.
      const env = await sbx.commands.run('echo "$GREETING $(pwd)"', { envs: { GREETING: 'hi' } });
      assert.equal(env.stdout, 'hi /home/user\n');
      await assert.rejects(() => sbx.commands.run('echo bad >&2; exit 3'), (e) => {
        assert.ok(e instanceof CommandExitError, `${e}`);
        assert.equal(e.exitCode, 3);
        assert.equal(e.stderr, 'bad\n');
        return true;
      });
    } finally {
      await sbx.kill();
    }
  });

  test('background commands: listed, fed stdin, killed', async () => {
    const sbx = await Sandbox.create();
    try {
      const echo = await sbx.commands.run('read line; echo "got:$line"', { background: true, stdin: true });
      await echo.sendStdin('hello\n');
      const echoed = await echo.wait();
      assert.equal(echoed.stdout, 'got:hello\n');

      const sleeper = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
      const listed = await sbx.commands.list();
      assert.ok(listed.some((p) => p.pid === sleeper.pid && p.args.includes('sleep 600')),
        JSON.stringify(listed));
      assert.equal(await sleeper.kill(), true);
      await assert.rejects(() => sleeper.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
      assert.ok(!(await sbx.commands.list()).some((p) => p.pid === sleeper.pid));
      assert.equal(await sbx.commands.kill(987654), false);  // no such process
    } finally {
      await sbx.kill();
    }
  });

  test('runCode and commands share the files; files.* manage them (envd filesystem.Filesystem)', async () => {
    const sbx = await Sandbox.create();
    try {
      await sbx.runCode("open('from_code.txt', 'w').write('x' * 10)");
      assert.match((await sbx.commands.run('ls')).stdout, /from_code\.txt/);

      assert.equal(await sbx.files.makeDir('/home/user/dir/sub'), true);
      assert.equal(await sbx.files.makeDir('/home/user/dir/sub'), false);  // already there
      await sbx.files.write('/home/user/dir/sub/a.txt', 'abc');
      assert.equal(await sbx.files.exists('/home/user/dir/sub/a.txt'), true);
      assert.equal(await sbx.files.exists('/home/user/nope.txt'), false);

      const info = await sbx.files.getInfo('/home/user/from_code.txt');
      assert.equal(info.name, 'from_code.txt');
      assert.equal(info.type, 'file');
      assert.equal(info.path, '/home/user/from_code.txt');
      assert.equal(info.size, 10);
      assert.ok(info.modifiedTime instanceof Date && info.modifiedTime.getTime() > 0);

      const top = await sbx.files.list('/home/user');
      const names = top.map((e) => e.name).filter((n) => !n.startsWith('.')).sort();  // not the kernel's dotfiles
      assert.deepEqual(names, ['dir', 'from_code.txt']);
      assert.equal(top.find((e) => e.name === 'dir').type, 'dir');
      const deep = await sbx.files.list('/home/user/dir', { depth: 2 });
      assert.deepEqual(deep.map((e) => e.path).sort(), ['/home/user/dir/sub', '/home/user/dir/sub/a.txt']);

      const moved = await sbx.files.rename('/home/user/dir/sub/a.txt', '/home/user/b.txt');
      assert.equal(moved.path, '/home/user/b.txt');
      assert.equal(await sbx.files.read('/home/user/b.txt'), 'abc');
      await sbx.files.remove('/home/user/dir');
      assert.equal(await sbx.files.exists('/home/user/dir'), false);
      assert.equal((await sbx.commands.run('ls')).stdout, 'b.txt\nfrom_code.txt\n');
    } finally {
      await sbx.kill();
    }
  });

  test('bad envd requests get Connect errors and the daemon keeps serving', async () => {
    const sbx = await Sandbox.create();
    try {
      const { envdAccessToken } = await (await fetch(`${base}/sandboxes/${sbx.sandboxId}/connect`, {
        method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json', 'X-API-KEY': KEY },
      })).json();
      const headers = (type, id = sbx.sandboxId) => ({
        'Content-Type': type, 'Connect-Protocol-Version': '1', 'E2b-Sandbox-Id': id, 'X-Access-Token': envdAccessToken,
      });
      const envelope = (flags, text) => {
        const payload = Buffer.from(text);
        const head = Buffer.alloc(5);
        head[0] = flags;
        head.writeUInt32BE(payload.length, 1);
        return Buffer.concat([head, payload]);
      };
      // The stream's end-of-stream frame, from a whole streamed body.
      const endOf = (body) => {
        const bytes = Buffer.from(body);
        let at = 0, end;
        while (at + 5 <= bytes.length) {
          const size = bytes.readUInt32BE(at + 1);
          if (bytes[at] & 2) end = JSON.parse(bytes.subarray(at + 5, at + 5 + size).toString());
          at += 5 + size;
        }
        return end;
      };
      const start = (body, id) => fetch(`${base}/process.Process/Start`, {
        method: 'POST', body, headers: headers('application/connect+json', id),
      });

      let r = await start(Buffer.from([0, 0, 0, 0, 99, 1, 2]));  // truncated envelope
      assert.equal(r.status, 200);
      assert.equal(endOf(await r.arrayBuffer()).error.code, 'invalid_argument');
      r = await start(envelope(0, '{"process":{"cmd":"/bin/true"}}'), 's-000000000000000000000000');
      assert.equal(endOf(await r.arrayBuffer()).error.code, 'not_found');
      r = await start(envelope(0, 'x'.repeat(8 << 20)));
      assert.equal(endOf(await r.arrayBuffer()).error.code, 'resource_exhausted');

      r = await fetch(`${base}/process.Process/SendInput`, {
        method: 'POST', headers: headers('application/json'),
        body: JSON.stringify({ process: { pid: 4242 }, input: { stdin: 'aGk=' } }),
      });
      assert.equal(r.status, 404);
      assert.equal((await r.json()).code, 'not_found');
      r = await fetch(`${base}/filesystem.Filesystem/Stat`, { method: 'POST', headers: headers('application/json'), body: '{nope' });
      assert.equal(r.status, 400);
      assert.equal((await r.json()).code, 'invalid_argument');
      r = await fetch(`${base}/filesystem.Filesystem/GetWatcherEvents`, {
        method: 'POST', headers: headers('application/json'), body: '{"watcherId":"w-none"}',
      });
      assert.equal(r.status, 404);
      assert.equal((await r.json()).code, 'not_found');

      // Binary Connect: an empty ListRequest, answered in protobuf.
      r = await fetch(`${base}/process.Process/List`, {
        method: 'POST', headers: headers('application/proto'), body: new Uint8Array(0),
      });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/proto');

      // Still serving.
      const ok = await sbx.commands.run('echo still here');
      assert.equal(ok.stdout, 'still here\n');
    } finally {
      await sbx.kill();
    }
  });
});
