// A wardend subprocess for the E2B SDK tests, configured the way a user
// would: a tokens file with one E2B-shaped key, and the HTTP front on a
// loopback port. startWardend() sets E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY (the whole configuration an SDK user gives) and returns
// {base, key, socket (warden.v1's, for the CLI), log(), stop()}.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const KEY = 'e2b_0123456789abcdef0123456789abcdef';
const binDir = process.env.WARDEN_BIN_DIR ?? new URL('../../build/bin', import.meta.url).pathname;

// Waits, until a deadline, for wardend to log the HTTP front's port.
function waitForPort(child, deadlineMs) {
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

// `idBase` keeps each test file's sandboxes on host ids of their own;
// `config` is merged into wardend's configuration.
export async function startWardend({ idBase, config: extra = {} }) {
  const tmp = mkdtempSync(join(tmpdir(), 'warden-e2b-'));
  const tokens = join(tmp, 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ tokens: [{ token: KEY, tenant: 'e2b-test' }] }), { mode: 0o600 });
  const config = join(tmp, 'wardend.json');
  writeFileSync(config, JSON.stringify({
    auth: { tokens_file: tokens },
    executor: { host_id_base: idBase + (process.pid % 4096) * 1024, host_id_count: 1024 },
    ...extra,
  }));
  const socket = join(tmp, 'w.sock');
  const daemon = spawn(join(binDir, 'wardend'),
    ['--config', config, '--listen', `unix:${socket}`, '--http-listen', '127.0.0.1:0'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  daemon.stdout.on('data', (d) => { log += d; });
  daemon.stderr.on('data', (d) => { log += d; });
  const port = await waitForPort(daemon, 60_000);
  const base = `http://127.0.0.1:${port}`;
  process.env.E2B_API_URL = base;
  process.env.E2B_SANDBOX_URL = base;
  process.env.E2B_API_KEY = KEY;
  const stop = async () => {
    if (daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon.on('exit', resolve));
      daemon.kill('SIGTERM');
      await exited;
    }
    rmSync(tmp, { recursive: true, force: true });
  };
  return { base, key: KEY, socket, log: () => log, stop };
}

// The SDK (`e2b` itself with `base`), imported after the variables are set.
export async function importSdk({ base = false } = {}) {
  try {
    return await import(base ? 'e2b' : '@e2b/code-interpreter');
  } catch (e) {
    throw new Error(`the E2B SDK is not installed in tests/e2b: run \`make test-deps\` (${e.message})`);
  }
}
