// The unmodified E2B SDK and MCP SDK, from the test folders' own pinned
// node_modules (tests/e2b, tests/protocols; `make test-deps`), through
// warden-gateway's HTTP fronts, configured as a user configures them for a
// single wardend. Run by swarm_fleet_test.py from the client's network
// namespace:
//
//   GATEWAY_HTTP=http://10.252.0.11:8080 WARDEN_TOKEN=... node sdks_via_gateway.mjs
//
// Prints one JSON line: what each SDK saw.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.GATEWAY_HTTP;
const token = process.env.WARDEN_TOKEN;

async function load(folder, name) {
  const require = createRequire(path.join(here, '..', folder, 'package.json'));
  return import(pathToFileURL(require.resolve(name)).href);
}

const report = {};

// E2B: the three variables its documentation names, nothing else.
process.env.E2B_API_URL = base;
process.env.E2B_SANDBOX_URL = base;
process.env.E2B_API_KEY = token;
const { Sandbox } = await load('e2b', '@e2b/code-interpreter');
const sbx = await Sandbox.create();
try {
  await sbx.runCode('x = 41');
  const value = await sbx.runCode('x + 1');
  assert.equal(value.text, '42');
  await sbx.files.write('/home/user/in.txt', 'hello');
  const read = await sbx.runCode("open('in.txt').read().upper()");
  assert.equal(read.text, 'HELLO');  // unquoted, as from E2B's server
  const listed = await Sandbox.list();
  report.e2b = { sandbox: sbx.sandboxId, value: value.text, listed: (await listed.nextItems()).length };
} finally {
  await sbx.kill();
}

// MCP over Streamable HTTP, with the bearer token.
const { Client } = await load('protocols', '@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('protocols', '@modelcontextprotocol/sdk/client/streamableHttp.js');
const client = new Client({ name: 'warden-fleet-test', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));
const tools = await client.listTools();
assert.ok(tools.tools.some((t) => t.name === 'execute_code'));
const created = await client.callTool({ name: 'create_session', arguments: { language: 'python' } });
const id = created.structuredContent.session_id;
await client.callTool({ name: 'execute_code', arguments: { code: 'y = 6', session_id: id } });
const again = await client.callTool({ name: 'execute_code', arguments: { code: 'y * 7', session_id: id } });
assert.match(JSON.stringify(again.content), /42/);
await client.callTool({ name: 'close_session', arguments: { session_id: id } });
await client.close();
report.mcp = { session: id, tools: tools.tools.length };

console.log(JSON.stringify(report));
