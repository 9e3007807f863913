// An E2B sandbox outlives a restart of warden-gateway (docs/fleet.md): the
// unmodified E2B SDK, from tests/e2b's pinned node_modules, creates a
// sandbox through the gateway, prints {"sandbox": id}, waits for a line on
// stdin (the test restarts the gateway meanwhile, with the same
// http.e2b_key_file), then goes on with the same Sandbox object. Run by
// fleet_local_test.py:
//
//   GATEWAY_HTTP=http://127.0.0.1:PORT WARDEN_TOKEN=... OTHER_TOKEN=... node e2b_gateway_restart.mjs
//
// Prints a second JSON line: what it saw after the restart.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.GATEWAY_HTTP;
process.env.E2B_API_URL = base;
process.env.E2B_SANDBOX_URL = base;
process.env.E2B_API_KEY = process.env.WARDEN_TOKEN;
const require = createRequire(path.join(here, '..', 'e2b', 'package.json'));
const { Sandbox } = await import(pathToFileURL(require.resolve('@e2b/code-interpreter')).href);

const sbx = await Sandbox.create({ metadata: { purpose: 'restart' }, timeoutMs: 120_000 });
try {
  await sbx.runCode('x = 41');
  assert.equal((await sbx.runCode('var y = 5; y', { language: 'js' })).text, '5');
  await sbx.files.write('/home/user/before.txt', 'written before');
  console.log(JSON.stringify({ sandbox: sbx.sandboxId }));

  const lines = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once('line', resolve));
  lines.close();

  const report = { sandbox: sbx.sandboxId };
  report.python = (await sbx.runCode('x + 1')).text;
  // The JavaScript context made before the restart is found again (ListContexts), not made anew.
  report.javascript = (await sbx.runCode('y + 1', { language: 'js' })).text;
  report.read = await sbx.files.read('/home/user/before.txt');
  await sbx.files.write('/home/user/after.txt', 'written after');
  report.command = (await sbx.commands.run('cat /home/user/after.txt')).stdout;
  report.metadata = (await Sandbox.getInfo(sbx.sandboxId)).metadata;

  // The sandbox plane without the access token, or with a made-up one: refused.
  const plane = (headers) => fetch(`${base}/contexts`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, ...headers } });
  report.no_token = (await plane({})).status;
  report.wrong_token = (await plane({ 'X-Access-Token': 'wa1_' + 'A'.repeat(60) })).status;
  // Another tenant's key cannot connect (and so gets no access token).
  try {
    await Sandbox.connect(sbx.sandboxId, { apiKey: process.env.OTHER_TOKEN });
    report.other_tenant = 'connected';
  } catch (e) {
    report.other_tenant = e.constructor.name;
  }
  console.log(JSON.stringify(report));
} finally {
  await sbx.kill();
}
