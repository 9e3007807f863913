// An E2B sandbox is one machine (issue #22): the unmodified SDKs from npm
// (@e2b/code-interpreter 2.8, e2b 2.51) against a real wardend, one test per
// behaviour - commands, contexts, terminals and files as processes and paths
// of one sandbox; git; environment variables; file metadata and details;
// watchDir; terminals; lifecycle; a burst; allow_internet_access. Run by ctest
// (e2b_machine) with WARDEN_BIN_DIR; needs root, like every sandbox test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { KEY, importSdk, startWardend } from './wardend.mjs';

let wardend;
let Sandbox;
let CommandExitError;
let TimeoutError;
let FileNotFoundError;
let SandboxNotFoundError;
let SandboxError;
let FilesystemEventType;

const enc = (s) => new TextEncoder().encode(s);

// Waits until `check()` is true, or fails saying `what` after `ms`.
async function until(check, what, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// A sandbox for one test, killed after it.
async function withSandbox(opts, body) {
  const sbx = await Sandbox.create(opts);
  try {
    return await body(sbx);
  } finally {
    await sbx.kill().catch(() => {});
  }
}

before(async () => {
  wardend = await startWardend({ idBase: 15_000_000 });
  ({ Sandbox } = await importSdk());
  ({ CommandExitError, TimeoutError, FileNotFoundError, SandboxError, SandboxNotFoundError, FilesystemEventType } =
    await importSdk({ base: true }));
});

after(async () => {
  await wardend?.stop();
});

describe('An E2B sandbox is one machine', () => {
  test('commands share /tmp and one process table: one sees and signals another', () =>
    withSandbox({}, async (sbx) => {
      const sleeper = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
      await sbx.commands.run('echo note > /tmp/shared');
      const seen = await sbx.commands.run(`cat /tmp/shared; ps -o args= -p ${sleeper.pid}; kill -TERM ${sleeper.pid}`);
      assert.equal(seen.stdout, 'note\nsleep 600\n');
      await assert.rejects(() => sleeper.wait(), (e) => e instanceof CommandExitError);
      await assert.rejects(() => sbx.commands.run(`kill -0 ${sleeper.pid}`), (e) => e instanceof CommandExitError);
      // Code and commands too: the same /tmp.
      await sbx.runCode("open('/tmp/from_code', 'w').write('x')");
      assert.equal((await sbx.commands.run('cat /tmp/from_code')).stdout, 'x');
      assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n');
    }));

  test('a context may have a working directory other than home', () =>
    withSandbox({}, async (sbx) => {
      const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
      assert.equal(ctx.cwd, '/tmp');
      assert.equal((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text, '/tmp');
      assert.equal((await sbx.runCode('import os; os.getcwd()')).text, '/home/user');
      const listed = await sbx.listCodeContexts();
      assert.equal(listed.find((c) => c.id === ctx.id).cwd, '/tmp');
    }));

  test('sandbox-wide envs reach commands and cells; a call\'s own envs override them', () =>
    withSandbox({ envs: { FOO: 'sandbox', BAR: 'b' } }, async (sbx) => {
      assert.equal((await sbx.commands.run('echo $FOO $BAR')).stdout, 'sandbox b\n');
      assert.equal((await sbx.commands.run('echo $FOO', { envs: { FOO: 'cmd' } })).stdout, 'cmd\n');
      assert.equal((await sbx.commands.run('echo $FOO')).stdout, 'sandbox\n');
      const py = 'import os; os.getenv("FOO")';
      assert.equal((await sbx.runCode(py)).text, 'sandbox');
      assert.equal((await sbx.runCode(py, { envs: { FOO: 'cell' } })).text, 'cell');
      assert.equal((await sbx.runCode(py)).text, 'sandbox');
      assert.equal((await sbx.runCode('import os; os.getenv("NEW", "unset")', { envs: { NEW: '1' } })).text, '1');
      assert.equal((await sbx.runCode('import os; os.getenv("NEW", "unset")')).text, 'unset');
      const js = await sbx.runCode('console.log(process.env.FOO)', { language: 'js', envs: { FOO: 'js' } });
      assert.deepEqual(js.logs.stdout, ['js\n']);
      assert.deepEqual((await sbx.runCode('console.log(process.env.FOO)', { language: 'js' })).logs.stdout, ['sandbox\n']);
      assert.deepEqual((await sbx.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'sh' } })).logs.stdout, ['sh\n']);
      assert.deepEqual((await sbx.runCode('echo ${FOO}', { language: 'bash' })).logs.stdout, ['sandbox\n']);
    }));

  test('git works on repositories in /tmp, across commands', () =>
    withSandbox({}, async (sbx) => {
      const repo = '/tmp/work/repo';
      await sbx.git.init(repo, { initialBranch: 'main' });
      assert.equal(await sbx.files.exists(`${repo}/.git`), true);
      await sbx.files.write(`${repo}/README.md`, 'hello\n');
      await sbx.git.add(repo);
      const staged = await sbx.git.status(repo);
      assert.equal(staged.fileStatus.find((f) => f.name === 'README.md')?.staged, true);
      await sbx.git.commit(repo, 'first', { authorName: 'Bot', authorEmail: 'bot@example.com' });
      const branches = await sbx.git.branches(repo);
      assert.equal(branches.currentBranch, 'main');
      await sbx.git.setConfig('pull.rebase', 'true', { scope: 'local', path: repo });
      assert.equal(await sbx.git.getConfig('pull.rebase', { scope: 'local', path: repo }), 'true');
      // A remote served by git daemon on the sandbox's loopback: push, clone.
      await sbx.commands.run('git init --bare --initial-branch=main /tmp/work/remote.git');
      const daemon = await sbx.commands.run(
        'git daemon --reuseaddr --base-path=/tmp/work --export-all --enable=receive-pack --listen=127.0.0.1 --port=9418',
        { background: true, timeoutMs: 0 });
      try {
        await until(async () => (await sbx.commands.run('git ls-remote git://127.0.0.1/remote.git').catch(() => null)) !== null,
          'git daemon');
        await sbx.git.remoteAdd(repo, 'origin', 'git://127.0.0.1/remote.git');
        await sbx.git.push(repo, { remote: 'origin', branch: 'main' });
        await sbx.git.clone('git://127.0.0.1/remote.git', { path: '/tmp/work/clone' });
        assert.equal(await sbx.files.read('/tmp/work/clone/README.md'), 'hello\n');
      } finally {
        await daemon.kill();
      }
    }));

  test('files anywhere the sandbox user can write; metadata kept by list and rename', () =>
    withSandbox({}, async (sbx) => {
      const info = await sbx.files.write('/tmp/m/a.txt', 'a', { metadata: { author: 'me' } });
      assert.equal(info.path, '/tmp/m/a.txt');
      assert.deepEqual(info.metadata, { author: 'me' });
      assert.equal((await sbx.commands.run('cat /tmp/m/a.txt')).stdout, 'a');
      const stat = await sbx.files.getInfo('/tmp/m/a.txt');
      assert.deepEqual(stat.metadata, { author: 'me' });
      assert.equal(stat.owner, 'user');
      assert.deepEqual((await sbx.files.list('/tmp/m')).find((e) => e.name === 'a.txt').metadata, { author: 'me' });
      const moved = await sbx.files.rename('/tmp/m/a.txt', '/tmp/m/b.txt');
      assert.deepEqual(moved.metadata, { author: 'me' });
      assert.equal((await sbx.files.write('/tmp/m/b.txt', 'b')).metadata, undefined);  // cleared
      assert.equal((await sbx.files.getInfo('/tmp/m/b.txt')).metadata, undefined);
      await sbx.commands.run(`python3 -c "import os; os.setxattr('/tmp/m/b.txt', 'user.e2b.k', b'v')"`);
      assert.deepEqual((await sbx.files.getInfo('/tmp/m/b.txt')).metadata, { k: 'v' });
      // Not where the sandbox's user may not write: the system's files.
      await assert.rejects(() => sbx.files.write('/etc/x', 'x'));
      assert.ok((await sbx.files.list('/etc')).some((e) => e.name === 'passwd'));
    }));

  test('file details: directory sizes, symlink targets, listing order, removing what is gone, gzip', () =>
    withSandbox({}, async (sbx) => {
      await sbx.files.makeDir('order/b/d');
      await sbx.files.makeDir('order/b/c');
      await sbx.files.write('order/a.txt', 'a');
      await sbx.files.write('order/c.txt', 'c');
      const listed = await sbx.files.list('order', { depth: 2 });
      assert.deepEqual(listed.map((e) => e.path), ['/home/user/order/a.txt', '/home/user/order/b',
        '/home/user/order/b/c', '/home/user/order/b/d', '/home/user/order/c.txt']);
      const dir = await sbx.files.getInfo('order');
      assert.equal(dir.type, 'dir');
      assert.ok(dir.size > 0, `size ${dir.size}`);
      await sbx.commands.run('ln -s a.txt order/link');
      assert.equal((await sbx.files.getInfo('order/link')).symlinkTarget, '/home/user/order/a.txt');
      await sbx.files.remove('order/not-there');  // nothing to remove: no error
      const content = 'compressed on the way in. '.repeat(1000);
      await sbx.files.write('g.txt', content, { gzip: true });
      assert.equal(await sbx.files.read('g.txt'), content);
    }));

  test('watchDir follows a directory, recursively, with entries', () =>
    withSandbox({}, async (sbx) => {
      await sbx.files.makeDir('w');
      const events = [];
      const handle = await sbx.files.watchDir('w', (e) => { events.push(e); },
        { recursive: true, includeEntry: true });
      try {
        await sbx.files.write('w/a.txt', '1');
        await sbx.files.makeDir('w/sub');
        await until(() => events.some((e) => e.type === FilesystemEventType.CREATE && e.name === 'sub'), 'CREATE sub');
        await sbx.files.write('w/sub/b.txt', '2');
        await until(() => events.some((e) => e.type === FilesystemEventType.WRITE && e.name === 'sub/b.txt'),
          'WRITE sub/b.txt');
        const a = events.find((e) => e.type === FilesystemEventType.WRITE && e.name === 'a.txt');
        assert.equal(a.entry.path, '/home/user/w/a.txt');
        assert.equal(a.entry.type, 'file');
      } finally {
        await handle.stop();
      }
      await assert.rejects(() => sbx.files.watchDir('nope', () => {}), (e) => e instanceof FileNotFoundError);
      await assert.rejects(() => sbx.files.watchDir('w/a.txt', () => {}), (e) => e instanceof SandboxError);
    }));

  test('terminals: input, resize, reconnect, kill', () =>
    withSandbox({}, async (sbx) => {
      const dec = new TextDecoder();
      let out = '';
      const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d); }, envs: { ABC: '123' } });
      await sbx.pty.sendInput(t.pid, enc('echo "[$ABC]"; tput cols; tty\n'));
      await until(() => out.includes('[123]') && /\b80\b/.test(out) && out.includes('/dev/pts/'), 'the first lines');
      await sbx.pty.resize(t.pid, { cols: 100, rows: 30 });
      await sbx.pty.sendInput(t.pid, enc('stty size\n'));
      await until(() => out.includes('30 100'), 'the new size');
      await t.disconnect();
      let again = '';
      const re = await sbx.pty.connect(t.pid, { onData: (d) => { again += dec.decode(d); } });
      await sbx.pty.sendInput(t.pid, enc('echo back; exit\n'));
      await re.wait();
      assert.equal(re.exitCode, 0);
      assert.ok(again.includes('back'), again);

      const other = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
      assert.equal(await sbx.pty.kill(other.pid), true);
      await assert.rejects(() => sbx.commands.run(`kill -0 ${other.pid}`), (e) => e instanceof CommandExitError);
      assert.equal(await sbx.pty.kill(999999), false);
    }));

  test('lifecycle: connect never shortens, /health ends with the sandbox, a kill under a command is a timeout', async () => {
    const long = await Sandbox.create({ timeoutMs: 300_000 });
    try {
      const before = await Sandbox.getInfo(long.sandboxId);
      await Sandbox.connect(long.sandboxId, { timeoutMs: 10_000 });
      assert.equal((await long.getInfo()).endAt.getTime(), before.endAt.getTime());
      await long.connect({ timeoutMs: 600_000 });
      assert.ok((await long.getInfo()).endAt.getTime() > before.endAt.getTime());

      const cmd = await long.commands.run('sleep 60', { background: true });
      let started = false;
      const cell = long.runCode("import time; print('started', flush=True); time.sleep(60)",
        { timeoutMs: 120_000, onStdout: () => { started = true; } }).catch((e) => e);
      await until(() => started, 'the cell to run');
      await long.kill();
      const err = await cmd.wait().catch((e) => e);
      assert.ok(err instanceof TimeoutError, `${err}`);
      // As envd ends a stream whose sandbox is killed: `unavailable`, which
      // the SDK reports as the sandbox's timeout.
      assert.match(err.message, /ended before the stream completed: This error is likely due to sandbox timeout/);
      const cellErr = await cell;
      assert.ok(cellErr instanceof TimeoutError && /killed while the request/.test(cellErr.message), `${cellErr}`);
      // Asked after the kill, with its own token, it is gone as on E2B: 502.
      assert.equal(await long.isRunning(), false);
      await assert.rejects(() => long.commands.run('true'), (e) => e instanceof SandboxNotFoundError);
    } finally {
      await long.kill().catch(() => {});
    }

    const short = await Sandbox.create({ timeoutMs: 60_000 });
    assert.equal(await short.isRunning(), true);
    await short.setTimeout(1_000);
    await until(async () => !(await short.isRunning()), 'isRunning to turn false after the timeout');
  });

  test('a burst of sandboxes at once queues for its machines and is served whole', async () => {
    // Each a machine of its own, started one per core at a time: the rest
    // wait in line (not refused), and every one answers its first command.
    const n = 12;
    const results = await Promise.allSettled(Array.from({ length: n }, () =>
      withSandbox({}, async (sbx) => (await sbx.commands.run('echo ready')).stdout)));
    const failed = results.filter((r) => r.status !== 'fulfilled').map((r) => String(r.reason?.message ?? r.reason));
    assert.deepEqual(failed, []);
    assert.deepEqual(results.map((r) => r.value), Array(n).fill('ready\n'));
  });

  test('allow_internet_access: asked for, refused at once where the operator has egress off, saying so', () =>
    withSandbox({ allowInternetAccess: true }, async (sbx) => {
      const r = await fetch(`${wardend.base}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': KEY } });
      const info = await r.json();
      assert.equal(info.allowInternetAccess, true);
      assert.deepEqual(info.network.denyOut, []);
      const started = Date.now();
      // Through the proxy (HTTPS_PROXY is set): refused, naming the setting.
      const viaProxy = await sbx.commands.run(
        `python3 -c "import urllib.request; urllib.request.urlopen('https://example.com/')" 2>&1 || true`);
      assert.match(viaProxy.stdout, /egress\.enabled/);
      // Around it: the sandbox's own network has loopback only.
      await assert.rejects(
        () => sbx.commands.run(`python3 -c "import socket; socket.create_connection(('192.0.2.1', 80), timeout=20)"`),
        (e) => e instanceof CommandExitError && /unreachable/i.test(e.stderr));
      assert.ok(Date.now() - started < 10_000, 'the connection attempts failed at once');
    }));
});
