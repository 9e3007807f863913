// commands.run('true') through the E2B front, two ways, against one sandbox
// each: with the unmodified `e2b` SDK (tests/e2b's, installed by `make
// test-deps`), each the SDK's whole round trip (its HTTP, envd's Connect
// stream, the command's spawn in the sandbox and its end); and with a bare
// client writing the same Connect request (process.Process/Start, JSON) on
// one kept-alive connection, which leaves out the SDK's own cost. --warmup
// calls, then --n timed ones. Prints one JSON object: {sdk: {...}, raw:
// {...}}, each {n, p50_ms, p90_ms, p99_ms, mean_ms, min_ms, client_cpu_ms}.
// The E2B_* variables name the daemon, as for any E2B user.
//
//   node bench/e2b_commands.mjs [--n N] [--warmup N] [--command CMD]
import net from 'node:net';
import { createRequire } from 'node:module';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const n = Number(flag('--n', '200'));
const warmup = Number(flag('--warmup', '20'));
const command = flag('--command', 'true');

const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
const { Sandbox } = await import(require.resolve('e2b'));

// Times `once` --n times after --warmup calls; node's CPU time per call too.
async function measure(once) {
  for (let i = 0; i < warmup; i++) await once();
  const ms = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await once();
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  const used = process.cpuUsage(cpu);
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))];
  const round = (v) => Math.round(v * 1000) / 1000;
  return {
    n, command, p50_ms: round(at(0.5)), p90_ms: round(at(0.9)), p99_ms: round(at(0.99)), min_ms: round(ms[0]),
    mean_ms: round(ms.reduce((a, b) => a + b, 0) / ms.length),
    client_cpu_ms: round((used.user + used.system) / 1000 / n),  // node's own, not the server's
  };
}

// The request the SDK sends for commands.run(command), written by hand.
async function raw(sbx) {
  const url = new URL(process.env.E2B_SANDBOX_URL);
  const json = Buffer.from(JSON.stringify({
    process: { cmd: '/bin/bash', args: ['-l', '-c', command], envs: {}, cwd: '/home/user' },
  }));
  const envelope = Buffer.alloc(5 + json.length);
  envelope.writeUInt32BE(json.length, 1);
  json.copy(envelope, 5);
  const request = Buffer.concat([Buffer.from(
    `POST /process.Process/Start HTTP/1.1\r\nHost: ${url.host}\r\n` +
    'Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\n' +
    `E2b-Sandbox-Id: ${sbx.sandboxId}\r\nX-Access-Token: ${sbx.envdAccessToken}\r\n` +
    `Content-Length: ${envelope.length}\r\n\r\n`), envelope]);
  const socket = net.connect(Number(url.port), url.hostname);
  socket.setNoDelay(true);
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let seen = '';
  let done = null;
  socket.on('data', (chunk) => {
    seen += chunk.toString('latin1');
    // The chunked answer's last chunk, after the end-of-stream message.
    if (seen.includes('\r\n0\r\n\r\n')) {
      const answer = seen;
      seen = '';
      done(answer);
    }
  });
  const once = async () => {
    const answer = await new Promise((resolve) => { done = resolve; socket.write(request); });
    if (!answer.startsWith('HTTP/1.1 200') || !answer.includes('"exitCode"') && !answer.includes('"exited"')) {
      throw new Error(`unexpected answer: ${answer.slice(0, 300)}`);
    }
  };
  try {
    return await measure(once);
  } finally {
    socket.destroy();
  }
}

const sbx = await Sandbox.create();
try {
  const out = { sdk: await measure(() => sbx.commands.run(command)) };
  if (sbx.envdAccessToken) out.raw = await raw(sbx);
  console.log(JSON.stringify(out));
} finally {
  await sbx.kill();
}
