// A burst of N concurrent E2B sandboxes, each created then given its first
// command, through the unmodified SDK (ComputeSDK's "time to interactive"),
// against E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY. bench/fleet_bench.py
// runs it against warden-gateway. Prints one JSON line.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'e2b', 'package.json'));
const { Sandbox } = await import(pathToFileURL(require.resolve('e2b')).href);
const n = Number(process.argv[2] ?? 100);

const times = [];
const failures = [];
const started = performance.now();
await Promise.all(Array.from({ length: n }, async () => {
  const t0 = performance.now();
  let sbx;
  try {
    sbx = await Sandbox.create({ timeoutMs: 600_000 });
    const r = await sbx.commands.run('echo ready');
    if (r.stdout.trim() !== 'ready') throw new Error(`stdout ${JSON.stringify(r.stdout)}`);
    times.push(performance.now() - t0);
  } catch (e) {
    failures.push(String(e.message ?? e).slice(0, 200));
  } finally {
    if (sbx) await sbx.kill().catch(() => {});
  }
}));
times.sort((a, b) => a - b);
const q = (p) => (times.length ? Math.round(times[Math.min(times.length - 1, Math.floor(p * times.length))]) : null);
console.log(JSON.stringify({
  sandboxes: n, ok: times.length, failures: failures.length, failure_sample: failures.slice(0, 3),
  median_ms: q(0.5), p99_ms: q(0.99), max_ms: times.length ? Math.round(times[times.length - 1]) : null,
  wall_s: Math.round((performance.now() - started) / 100) / 10,
}));
