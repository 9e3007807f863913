// The Jupyter Kernel Gateway API of a real wardend, driven by an unmodified
// Jupyter client (@jupyterlab/services 7.6, with `ws` as Node 20's
// WebSocket), plus raw requests the way AutoGen and smolagents make them
// (plain JSON frames, `Authorization: token`) and bad input.
//
// Starts $WARDEN_BIN_DIR/wardend with a tokens file and its HTTP front on a
// loopback port (--http-listen, the Kernel Gateway API under /api), runs every step in order, stops wardend with SIGTERM and
// expects it to exit 0. Needs root (wardend builds sandboxes).
//
// With --via-jupyter-server, the client talks to Debian's Jupyter Server
// 1.23 started with --gateway-url pointing at wardend (a second real
// Kernel Gateway client, the one JupyterLab and Notebook use for remote
// kernels), and only the steps marked `both` run.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let services, WebSocket;
try {
  services = (await import('@jupyterlab/services')).default;
  WebSocket = (await import('ws')).default;
} catch (e) {
  console.error(`the test's npm packages are missing (${e.message}): run \`make test-deps\` ` +
                '(npm ci in tests/kernel_gateway)');
  process.exit(1);
}
const { KernelManager, KernelSpecAPI, ServerConnection } = services;

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN_DIR = process.env.WARDEN_BIN_DIR ?? path.join(HERE, '..', '..', 'build', 'bin');
const STARTUP_TIMEOUT_MS = 60_000;
const TOKEN = 'kernel-gateway-test-token-0123456789';
const OTHER_TENANT_TOKEN = 'kernel-gateway-other-tenant-0123456789';

// --- the daemon ---

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startWardend() {
  const wardend = path.join(BIN_DIR, 'wardend');
  fs.accessSync(wardend, fs.constants.X_OK);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-kg-'));
  const tokens = path.join(tmp, 'tokens.json');
  fs.writeFileSync(tokens, JSON.stringify({ tokens: [{ token: TOKEN, tenant: 'jupyter-test' },
                                                        { token: OTHER_TENANT_TOKEN, tenant: 'someone-else' }] }), { mode: 0o600 });
  const config = path.join(tmp, 'wardend.json');
  fs.writeFileSync(config, JSON.stringify({
    auth: { tokens_file: tokens },
    // A host id range of our own, so other wardends on this machine (ctest -j) never share it.
    executor: { host_id_base: 7_000_000 + (process.pid % 4096) * 1024, host_id_count: 1024 },
    pools: [{ language: 'python', size: 1, warm: [], memory_mb: 0 }],
  }));
  const log = fs.openSync(path.join(tmp, 'wardend.log'), 'w');
  const child = spawn(wardend, ['--config', config, '--listen', `unix:${tmp}/w.sock`,
                                 '--http-listen', '127.0.0.1:0'], { stdio: ['ignore', log, log] });
  const daemon = { child, port: 0, tmp, exited: null };
  child.on('exit', (code, signal) => { daemon.exited = { code, signal }; });
  // wardend's own HTTP front serves the Kernel Gateway API under /api; its
  // log names the port it bound.
  const portDeadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!daemon.port) {
    if (daemon.exited) throw new Error(`wardend exited before serving:\n${logTail(daemon)}`);
    const m = /HTTP front \(MCP at \/mcp\) on port (\d+)/.exec(fs.readFileSync(path.join(tmp, 'wardend.log'), 'utf8'));
    if (m) daemon.port = Number(m[1]);
    else if (Date.now() > portDeadline) throw new Error(`wardend named no HTTP port within ${STARTUP_TIMEOUT_MS} ms:\n${logTail(daemon)}`);
    else await new Promise(resolve => setTimeout(resolve, 50));  // the next look at the log
  }
  const port = daemon.port;
  // Ready once a call reaches wardend through the front; fail at once if wardend exits first.
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (daemon.exited) throw new Error(`wardend exited before serving:\n${logTail(daemon)}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/api/kernels`, { headers: { Authorization: `token ${TOKEN}` } });
      if (r.ok) return daemon;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`wardend did not serve within ${STARTUP_TIMEOUT_MS} ms:\n${logTail(daemon)}`);
    await new Promise(resolve => setTimeout(resolve, 50));  // the next connection attempt
  }
}

function logTail(daemon) {
  try {
    return fs.readFileSync(path.join(daemon.tmp, 'wardend.log'), 'utf8').split('\n').slice(-40).join('\n');
  } catch (e) {
    return `(no log: ${e})`;
  }
}

// SIGTERM to a child this script started; resolves with how it exited.
async function stopChild(daemon) {
  if (!daemon.exited) {
    const exited = new Promise(resolve => daemon.child.once('exit', resolve));
    daemon.child.kill('SIGTERM');
    await exited;
  }
  return daemon.exited;
}

// --- helpers ---

const base = port => `http://127.0.0.1:${port}`;

async function http(port, method, url, { body, token = TOKEN, headers = {} } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = `token ${token}`;
  const r = await fetch(base(port) + url, { method, body, headers: h });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}

function assertKgError(r, status, what) {
  assert.equal(r.status, status, `${what}: ${r.status} ${r.text}`);
  assert.ok(r.json && typeof r.json.message === 'string' && typeof r.json.reason === 'string',
            `${what}: Kernel Gateway's error shape {reason, message}, got ${r.text}`);
}

// Runs code on a KernelConnection; returns the iopub messages and the reply.
async function run(kernel, code, { onIOPub } = {}) {
  const iopub = [];
  const future = kernel.requestExecute({ code, stop_on_error: true });
  future.onIOPub = msg => { iopub.push(msg); onIOPub?.(msg); };
  const reply = await future.done;
  return { iopub, reply: reply.content, types: iopub.map(m => m.header.msg_type) };
}

function streamText(iopub, name = 'stdout') {
  return iopub.filter(m => m.header.msg_type === 'stream' && m.content.name === name)
    .map(m => m.content.text).join('');
}

// A raw WebSocket in plain JSON (no subprotocol), as AutoGen opens it.
async function openRawChannel(port, kernelId, headers) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/api/kernels/${kernelId}/channels`, { headers });
  const received = [];
  const waiters = [];
  ws.on('message', (data, isBinary) => {
    assert.equal(isBinary, false, 'plain JSON is sent as text frames');
    received.push(JSON.parse(data.toString()));
    for (const w of [...waiters]) w();
  });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  assert.equal(ws.protocol, '', 'no subprotocol offered, none chosen');
  // Resolves with every message so far once `done(received)` holds.
  const until = (done, ms = 30_000) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out; got ${JSON.stringify(received.map(m => m.msg_type))}`)), ms);
    const check = () => {
      if (done(received)) {
        clearTimeout(timer);
        waiters.splice(waiters.indexOf(check), 1);
        resolve(received);
      }
    };
    waiters.push(check);
    check();
  });
  return { ws, received, until };
}

function rawRequest(msgType, content, channel = 'shell') {
  const msgId = `raw-${Math.random().toString(16).slice(2)}`;
  return {
    msgId,
    frame: JSON.stringify({
      header: { msg_id: msgId, msg_type: msgType, session: 'raw-client', username: 'test', version: '5.0',
                date: new Date().toISOString() },
      parent_header: {}, metadata: {}, content, channel,
    }),
  };
}

// --- the steps ---

const steps = [];
// `both`: also through Jupyter Server (--via-jupyter-server).
const step = (name, fn, { both = false } = {}) => steps.push({ name, fn, both });

step('kernelspecs: python3, javascript and bash', async ({ settings }) => {
  const specs = await KernelSpecAPI.getSpecs(settings);
  assert.equal(specs.default, 'python3');
  for (const name of ['python3', 'javascript', 'bash']) {
    assert.ok(specs.kernelspecs[name], `${name} offered`);
    assert.equal(specs.kernelspecs[name].name, name);
  }
  assert.equal(specs.kernelspecs.python3.language, 'python');  // the client flattens spec into the model
}, { both: true });

step('start a python3 kernel (201, UUID-shaped id) and read kernel_info', async (ctx) => {
  ctx.manager = new KernelManager({ serverSettings: ctx.settings });
  await ctx.manager.ready;
  ctx.kernel = await ctx.manager.startNew({ name: 'python3' });
  assert.match(ctx.kernel.id, /^\w+-\w+-\w+-\w+-\w+$/);
  const info = await ctx.kernel.info;
  assert.equal(info.language_info.name, 'python');
  assert.equal(info.implementation, 'warden');
  const listed = await http(ctx.port, 'GET', '/api/kernels', { token: ctx.token });
  assert.equal(listed.status, 200);
  const model = listed.json.find(k => k.id === ctx.kernel.id);
  assert.ok(model, `the new kernel is listed: ${listed.text}`);
  assert.equal(model.name, 'python3');
  assert.ok(model.connections >= 1, 'the client\'s WebSocket counts as a connection');
}, { both: true });

step('execute: status busy, execute_input, stream, execute_result, execute_reply, idle', async ({ kernel }) => {
  const { iopub, reply, types } = await run(kernel, 'print("hello from warden")\n6 * 7');
  assert.equal(reply.status, 'ok');
  assert.equal(streamText(iopub), 'hello from warden\n');
  assert.deepEqual(types.filter(t => t !== 'stream'), ['status', 'execute_input', 'execute_result', 'status']);
  assert.equal(iopub[0].content.execution_state, 'busy');
  assert.equal(iopub.at(-1).content.execution_state, 'idle');
  const result = iopub.find(m => m.header.msg_type === 'execute_result');
  assert.equal(result.content.data['text/plain'], '42');
  assert.equal(result.content.execution_count, reply.execution_count);
}, { both: true });

step('state persists between cells', async ({ kernel }) => {
  await run(kernel, 'x = 41');
  const { iopub } = await run(kernel, 'x + 1');
  assert.equal(iopub.find(m => m.header.msg_type === 'execute_result').content.data['text/plain'], '42');
}, { both: true });

step('display_data: a matplotlib figure as a PNG', async ({ kernel }) => {
  const { iopub, reply } = await run(kernel, 'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9]);');
  assert.equal(reply.status, 'ok');
  const display = iopub.find(m => m.header.msg_type === 'display_data');
  assert.ok(display, `a display_data message among ${iopub.map(m => m.header.msg_type)}`);
  const png = Buffer.from(display.content.data['image/png'], 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
}, { both: true });

step('error: the exception as an error message and an error reply', async ({ kernel }) => {
  const { iopub, reply } = await run(kernel, '1 / 0');
  assert.equal(reply.status, 'error');
  assert.equal(reply.ename, 'ZeroDivisionError');
  const error = iopub.find(m => m.header.msg_type === 'error');
  assert.equal(error.content.ename, 'ZeroDivisionError');
  assert.equal(error.content.evalue, 'division by zero');
  assert.ok(error.content.traceback.length > 0);
}, { both: true });

step('interrupt a running cell (REST)', async (ctx) => {
  let started;
  const running = new Promise(resolve => { started = resolve; });
  const cell = run(ctx.kernel, 'import time\nprint("started", flush=True)\ntime.sleep(120)',
                   { onIOPub: m => { if (m.header.msg_type === 'stream') started(); } });
  await running;
  await ctx.kernel.interrupt();
  const { reply } = await cell;
  assert.equal(reply.status, 'error');
  assert.equal(reply.ename, 'KeyboardInterrupt');
  const { iopub } = await run(ctx.kernel, 'x');
  assert.equal(iopub.find(m => m.header.msg_type === 'execute_result').content.data['text/plain'], '41',
               'an interrupt keeps the state');
}, { both: true });

step('restart: a fresh interpreter', async ({ kernel }) => {
  await kernel.restart();
  const { reply, iopub } = await run(kernel, '"x" in globals()');
  assert.equal(reply.status, 'ok');
  assert.equal(iopub.find(m => m.header.msg_type === 'execute_result').content.data['text/plain'], 'False');
}, { both: true });

step('plain JSON frames with top-level msg_type, as AutoGen and smolagents read them', async (ctx) => {
  const raw = await openRawChannel(ctx.port, ctx.kernel.id, { Authorization: `token ${TOKEN}` });
  try {
    raw.ws.send('{this is not json');  // dropped; the channel keeps serving
    const info = rawRequest('kernel_info_request', {});
    raw.ws.send(info.frame);
    await raw.until(ms => ms.some(m => m.msg_type === 'kernel_info_reply'));
    const exec = rawRequest('execute_request', { code: 'print(2 + 2)', silent: false, store_history: true,
                                                 user_expressions: {}, allow_stdin: false, stop_on_error: true });
    raw.ws.send(exec.frame);
    const ms = await raw.until(ms => ms.some(m => m.msg_type === 'status' && m.parent_header.msg_id === exec.msgId &&
                                                  m.content.execution_state === 'idle'));
    const mine = ms.filter(m => m.parent_header.msg_id === exec.msgId);
    for (const m of mine) {
      assert.equal(m.msg_id, m.header.msg_id);
      assert.equal(m.msg_type, m.header.msg_type);
      assert.ok(['shell', 'iopub'].includes(m.channel));
    }
    // Output may come in more than one stream message, as from any kernel.
    assert.equal(mine.filter(m => m.msg_type === 'stream').map(m => m.content.text).join(''), '4\n');
    assert.equal(mine.find(m => m.msg_type === 'execute_reply').content.status, 'ok');
  } finally {
    raw.ws.close();
  }
});

step('a javascript kernel', async (ctx) => {
  const js = await ctx.manager.startNew({ name: 'javascript' });
  try {
    const { reply, iopub } = await run(js, 'const a = 20; a + 22');
    assert.equal(reply.status, 'ok');
    assert.equal(iopub.find(m => m.header.msg_type === 'execute_result').content.data['text/plain'], '42');
  } finally {
    await js.shutdown();
  }
}, { both: true });

step('a bash kernel: a failing command is an error reply', async (ctx) => {
  const sh = await ctx.manager.startNew({ name: 'bash' });
  try {
    const ok = await run(sh, 'cd /tmp && echo "in $PWD"');
    assert.equal(ok.reply.status, 'ok');
    assert.equal(streamText(ok.iopub), 'in /tmp\n');
    const failed = await run(sh, 'ls /no/such/dir');
    assert.equal(failed.reply.status, 'error');
    assert.equal(failed.reply.ename, 'NonZeroExitError');
    assert.match(streamText(failed.iopub, 'stderr'), /No such file/);
  } finally {
    await sh.shutdown();
  }
});

step('bad input gets Kernel Gateway errors', async ({ port, kernel }) => {
  assertKgError(await http(port, 'POST', '/api/kernels', { body: '{"name": ' }), 400, 'malformed JSON');
  assertKgError(await http(port, 'POST', '/api/kernels', { body: '{"name": "cobol"}' }), 404, 'unknown kernel spec');
  assertKgError(await http(port, 'GET', '/api/kernels/01234567-89ab-cdef-0123-456700000000'), 404, 'unknown kernel');
  assertKgError(await http(port, 'DELETE', '/api/kernels/01234567-89ab-cdef-0123-456700000000'), 404,
                'deleting an unknown kernel');
  assertKgError(await http(port, 'POST', '/api/kernels/01234567-89ab-cdef-0123-456700000000/interrupt'), 404,
                'interrupting an unknown kernel');
  assertKgError(await http(port, 'POST', '/api/kernels', { body: JSON.stringify({ name: 'python3', pad: 'x'.repeat(2 << 20) }) }),
                413, 'oversized body');
  assertKgError(await http(port, 'GET', '/api/kernels', { token: '' }), 401, 'missing token');
  assertKgError(await http(port, 'GET', '/api/kernels', { token: 'not-the-token-0123456789' }), 401, 'wrong token');
  const byQuery = await http(port, 'GET', `/api/kernels/${kernel.id}?token=${TOKEN}`, { token: '' });
  assert.equal(byQuery.status, 200, `?token= authenticates too: ${byQuery.text}`);
  await assert.rejects(openRawChannel(port, kernel.id, {}), 'a WebSocket without a token is refused');
  await assert.rejects(openRawChannel(port, '01234567-89ab-cdef-0123-456700000000',
                                      { Authorization: `token ${TOKEN}` }), 'a WebSocket to an unknown kernel is refused');
});

step("another tenant's token sees none of these kernels", async ({ port, kernel }) => {
  const list = await http(port, 'GET', '/api/kernels', { token: OTHER_TENANT_TOKEN });
  assert.equal(list.status, 200);
  assert.deepEqual(list.json, []);
  for (const [method, suffix] of [['GET', ''], ['DELETE', ''], ['POST', '/interrupt'], ['POST', '/restart']]) {
    assertKgError(await http(port, method, `/api/kernels/${kernel.id}${suffix}`, { token: OTHER_TENANT_TOKEN }), 404,
                  `${method} ${suffix || 'kernel'} as another tenant`);
  }
  await assert.rejects(openRawChannel(port, kernel.id, { Authorization: `token ${OTHER_TENANT_TOKEN}` }),
                       "another tenant cannot open the kernel's channels");
  const { reply } = await run(kernel, '1');
  assert.equal(reply.status, 'ok', 'the kernel is untouched');
});

step('shut down: DELETE answers 204 and the kernel is gone', async ({ port, token, kernel }) => {
  const id = kernel.id;
  await kernel.shutdown();
  const gone = await http(port, 'GET', `/api/kernels/${id}`, { token });
  assert.equal(gone.status, 404, `a shut-down kernel: ${gone.text}`);
}, { both: true });

step('the daemon still serves', async ({ settings }) => {
  const specs = await KernelSpecAPI.getSpecs(settings);
  assert.ok(specs.kernelspecs.python3);
}, { both: true });

// --- Jupyter Server as the client of wardend (--via-jupyter-server) ---

const JUPYTER_SERVER_TOKEN = 'jupyter-server-test-token';

async function startJupyterServer(daemon) {
  const port = await freePort();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-kg-jupyter-'));
  const log = fs.openSync(path.join(home, 'jupyter-server.log'), 'w');
  const env = { ...process.env, HOME: home, JUPYTER_CONFIG_DIR: path.join(home, 'config'),
                JUPYTER_DATA_DIR: path.join(home, 'data'), JUPYTER_RUNTIME_DIR: path.join(home, 'runtime') };
  const child = spawn('/usr/bin/python3', [
    '-m', 'jupyter_server', '--ServerApp.ip=127.0.0.1', `--ServerApp.port=${port}`,
    '--ServerApp.port_retries=0', `--ServerApp.token=${JUPYTER_SERVER_TOKEN}`, '--ServerApp.open_browser=False',
    '--ServerApp.allow_root=True', `--ServerApp.root_dir=${home}`,
    `--GatewayClient.url=http://127.0.0.1:${daemon.port}`, `--GatewayClient.auth_token=${TOKEN}`,
  ], { stdio: ['ignore', log, log], env });
  const server = { child, port, tmp: home, exited: null, log: path.join(home, 'jupyter-server.log') };
  child.on('exit', (code, signal) => { server.exited = { code, signal }; });
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    if (server.exited) throw new Error(`jupyter server exited before serving:\n${fs.readFileSync(server.log, 'utf8')}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/api/kernelspecs?token=${JUPYTER_SERVER_TOKEN}`);
      if (r.ok) return server;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`jupyter server did not serve within ${STARTUP_TIMEOUT_MS} ms`);
    await new Promise(resolve => setTimeout(resolve, 50));  // the next connection attempt
  }
}

// --- main ---

const viaJupyterServer = process.argv.includes('--via-jupyter-server');
const daemon = await startWardend();
let jupyterServer = null;
let failed = 0;
try {
  if (viaJupyterServer) jupyterServer = await startJupyterServer(daemon);
} catch (e) {
  console.log(`FAIL starting jupyter server\n${e.stack ?? e}`);
  failed++;
}
const front = jupyterServer ?? daemon;
const ctx = {
  port: front.port,
  token: jupyterServer ? JUPYTER_SERVER_TOKEN : TOKEN,
  settings: ServerConnection.makeSettings({
    baseUrl: `${base(front.port)}/`, wsUrl: `ws://127.0.0.1:${front.port}/`,
    token: jupyterServer ? JUPYTER_SERVER_TOKEN : TOKEN, appendToken: true, WebSocket,
  }),
};
for (const { name, fn } of failed ? [] : steps.filter(s => s.both || !viaJupyterServer)) {
  const start = Date.now();
  try {
    await fn(ctx);
    console.log(`ok   ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n${e.stack ?? e}`);
    if (daemon.exited) break;
  }
}
ctx.manager?.dispose();
if (jupyterServer) {
  if (failed) console.log(`jupyter server log:\n${fs.readFileSync(jupyterServer.log, 'utf8').split('\n').slice(-60).join('\n')}`);
  await stopChild(jupyterServer);  // SIGTERM, and wait for it to exit
  fs.rmSync(jupyterServer.tmp, { recursive: true, force: true });
}
const exit = await stopChild(daemon);
if (failed) console.log(`wardend log:\n${logTail(daemon)}`);
if (exit.code !== 0) {
  console.log(`wardend exited with ${JSON.stringify(exit)} after SIGTERM, not 0:\n${logTail(daemon)}`);
  failed++;
}
fs.rmSync(daemon.tmp, { recursive: true, force: true });
console.log(failed ? `${failed} step(s) failed` : 'all steps passed');
process.exit(failed ? 1 : 0);
