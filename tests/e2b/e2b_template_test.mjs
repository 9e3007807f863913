// Sandbox.create('NAME') in a template of Warden's (docs/templates.md): an
// OCI image imported with the `warden` CLI (`warden template import`), then
// the unmodified SDKs from npm (@e2b/code-interpreter 2.8, e2b 2.51) asking
// for it by name, as they ask E2B for a template by its id or alias. The
// image is the Debian 12 one tests/images/debian_image.sh makes with
// mmdebstrap (cached; the ctest fixture template_debian_image builds it):
// python3 in a virtualenv at /opt/venv, node and bash. Inside the sandbox
// every promise of the default template holds: the image's root read-only,
// /tmp and /home/user writable, no network, the sandbox user. Run by ctest
// (e2b_template) with WARDEN_BIN_DIR; needs root, like every sandbox test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

import { KEY, importSdk, startWardend } from './wardend.mjs';

const binDir = process.env.WARDEN_BIN_DIR ?? fileURLToPath(new URL('../../build/bin', import.meta.url));
const source = fileURLToPath(new URL('../..', import.meta.url));

let wardend;
let Sandbox;
let CommandExitError;

// `warden ARGS...` against the test's wardend, as its operator (the E2B key's tenant).
function warden(...args) {
  return spawnSync(join(binDir, 'warden'), args, {
    encoding: 'utf8',
    env: { ...process.env, WARDEN_ADDR: `unix:${wardend.socket}`, WARDEN_TOKEN: KEY },
    maxBuffer: 16 << 20,
  });
}

let volumes;

before(async () => {
  volumes = mkdtempSync(join(tmpdir(), 'warden-e2b-volumes-'));
  const image = execFileSync(join(source, 'tests/images/debian_image.sh'), { encoding: 'utf8' }).trim();
  wardend = await startWardend({
    idBase: 16_000_000,
    // The store the template tests keep beside the image's cache: the
    // image's layer is unpacked there already after the first run.
    config: {
      templates: { dir: '/var/cache/warden-tests/template-store', operators: ['e2b-test'] },
      volumes: { dir: join(volumes, 'store'), default_bytes: 16 << 20, default_files: 1024 },
    },
  });
  const imported = warden('template', 'import', image, '--name', 'e2b-debian', '--ref', 'debian-venv');
  assert.equal(imported.status, 0, `warden template import failed:\n${imported.stderr}\n${wardend.log()}`);
  assert.equal(imported.stdout, 'e2b-debian\n');
  assert.match(imported.stderr, /layer 1\/1/);
  // The SDK's volume content API has an address of its own.
  process.env.E2B_VOLUME_API_URL = wardend.base;
  ({ Sandbox } = await importSdk());
  ({ CommandExitError } = await importSdk({ base: true }));
});

after(async () => {
  if (wardend) warden('template', 'rm', 'e2b-debian');
  await wardend?.stop();
  if (volumes) rmSync(volumes, { recursive: true, force: true });
});

describe('Sandbox.create(NAME) runs in the template NAME', () => {
  test('warden template list and show name its interpreters', () => {
    const listed = warden('template', 'list');
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /^NAME +OWNER +DIGEST +SIZE +LANGUAGES\n/);
    assert.match(listed.stdout, /\ne2b-debian +public +sha256:[0-9a-f]{12} .*python 3\.11\.\d+, javascript 18\.\d+\.\d+, bash 5\.2/);
    const shown = JSON.parse(warden('template', 'show', 'e2b-debian', '--json').stdout);
    assert.equal(shown.languages.python.interpreter, '/opt/venv/bin/python3');
    assert.ok(shown.env.includes('IMAGE_GREETING=debian-venv'));
  });

  test("commands and code run on the image's interpreters, in its root", async () => {
    const sbx = await Sandbox.create('e2b-debian');
    try {
      // The SDK runs commands in a login shell (bash -l -c), which reads the
      // image's /etc/profile: Debian's sets PATH, as `docker run IMAGE bash
      // -lc` would see it; the image's other ENV stays.
      const info = await sbx.commands.run('cut -c1-3 /etc/debian_version; echo $IMAGE_GREETING; id -un; pwd; /opt/venv/bin/python3 -c "import warden_extra"');
      assert.equal(info.stdout, '12.\ndebian-venv\nuser\n/home/user\n');
      const cell = await sbx.runCode('import sys, warden_extra\nx = 41\n(sys.executable, warden_extra.__name__)');
      assert.equal(cell.error, undefined);
      assert.equal(cell.text, "('/opt/venv/bin/python3', 'warden_extra')");
      assert.equal((await sbx.runCode('x + 1')).text, '42');
      // The host's runtime is not there: pandas is Warden's default template's.
      assert.equal((await sbx.runCode('import pandas')).error?.name, 'ModuleNotFoundError');
      const js = await sbx.runCode('console.log(process.version.split(".")[0])', { language: 'js' });
      assert.deepEqual(js.logs.stdout, ['v18\n']);
      // Files through envd land in the image's home.
      await sbx.files.write('/home/user/data.txt', 'from the SDK');
      assert.equal((await sbx.commands.run('cat ~/data.txt')).stdout, 'from the SDK');
    } finally {
      await sbx.kill();
    }
  });

  test('the image is read-only, /tmp and home are not, and there is no network', async () => {
    const sbx = await Sandbox.create('e2b-debian');
    try {
      await assert.rejects(() => sbx.commands.run('touch /opt/venv/x'),
        (e) => e instanceof CommandExitError && /Read-only file system/.test(e.stderr));
      await assert.rejects(() => sbx.commands.run('touch /usr/bin/x'),
        (e) => e instanceof CommandExitError && /Read-only file system/.test(e.stderr));
      assert.equal((await sbx.commands.run('touch /tmp/a ~/b && echo ok')).stdout, 'ok\n');
      const net = await sbx.runCode(
        'import socket\ntry:\n    socket.create_connection(("1.1.1.1", 53), timeout=3)\n    print("connected")\n' +
        'except OSError as e:\n    print("refused", e.errno)');
      assert.match(net.logs.stdout.join(''), /^refused /);
      // The sandbox user holds no capability, whatever the image's files say.
      assert.equal((await sbx.commands.run('grep CapEff /proc/self/status')).stdout, 'CapEff:\t0000000000000000\n');
    } finally {
      await sbx.kill();
    }
  });

  test('the Python client asks for it by name too', () => {
    // The package as it installs: client/python/warden with the stubs the
    // build generated inside it (warden/v1).
    const site = mkdtempSync(join(tmpdir(), 'warden-e2b-py-'));
    cpSync(join(source, 'client/python/warden'), join(site, 'warden'), { recursive: true });
    const stubs = join(binDir, '../proto/python/warden/v1');
    for (const name of readdirSync(stubs)) {
      if (name.endsWith('.py')) cpSync(join(stubs, name), join(site, 'warden/v1', name));
    }
    const script = [
      'import os, warden',
      'c = warden.Client(os.environ["ADDR"], token=os.environ["KEY"])',
      'with c.session(template="e2b-debian") as s:',
      '    print(s.info().template, s.run("import sys; print(sys.executable)").stdout.strip())',
      'print(c.run("import sys; print(sys.prefix)", template="e2b-debian").stdout.strip())',
      'print(c.run("import sys; print(sys.prefix)").stdout.strip())',
    ].join('\n');
    const run = spawnSync('/usr/bin/python3', ['-c', script], {
      encoding: 'utf8',
      env: { ...process.env, ADDR: `unix:${wardend.socket}`, KEY, PYTHONPATH: site },
    });
    rmSync(site, { recursive: true, force: true });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout, 'e2b-debian /opt/venv/bin/python3\n/opt/venv\n/usr\n');
  });

  test("a volume is shared by two sandboxes at once and outlives them (E2B's volume API)", async () => {
    const { Volume } = await importSdk({ base: true });
    const vol = await Volume.create('e2b-data');
    const a = await Sandbox.create('e2b-debian', { volumeMounts: { '/mnt/data': vol } });
    const b = await Sandbox.create({ volumeMounts: { '/data': vol } });  // the host's runtime
    try {
      await a.commands.run('echo from a > /mnt/data/note.txt');
      assert.equal((await b.commands.run('cat /data/note.txt')).stdout, 'from a\n');
      // Full is ENOSPC to the writer, at the volume's quota (16 MiB; a
      // sandbox's files may each grow to 64 MiB).
      await assert.rejects(() => b.commands.run('head -c 32M /dev/zero > /data/big'),
        (e) => e instanceof CommandExitError && /No space left on device/.test(e.stderr));
      await b.commands.run('rm /data/big');
    } finally {
      await a.kill();
      await b.kill();
    }
    assert.deepEqual((await Volume.list()).map((v) => v.name), ['e2b-data']);
    assert.equal(await vol.readFile('/note.txt', { format: 'text' }), 'from a\n');
    assert.equal(await vol.exists('/big'), false);
    await Volume.destroy(vol.volumeId);
    assert.deepEqual(await Volume.list(), []);
  });

  test('a template that is not here is refused, naming the ones that are', async () => {
    await assert.rejects(() => Sandbox.create('no-such-template'), /there is no template 'no-such-template'/);
  });

  test('warden template rm removes it; new sandboxes cannot ask for it', async () => {
    const imported = warden('template', 'import', '-', '--name', 'e2b-scratch', '--ref', 'debian');
    assert.notEqual(imported.status, 0);  // stdin is empty: no archive
    const rm = warden('template', 'rm', 'e2b-debian');
    assert.equal(rm.status, 0, rm.stderr);
    assert.doesNotMatch(warden('template', 'list').stdout, /e2b-debian/);
    await assert.rejects(() => Sandbox.create('e2b-debian'), /there is no template 'e2b-debian'/);
    const again = warden('template', 'rm', 'e2b-debian');
    assert.equal(again.status, 125);
    assert.match(again.stderr, /NOT_FOUND/);
  });
});
