// The code interpreter as E2B's SDKs use it, against a real wardend: the
// unmodified @e2b/code-interpreter and e2b from npm (tests/e2b's lock),
// configured only by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. One test
// per behaviour: cell handling, rich results, charts, languages, signed file
// URLs, metrics, pause and resume, snapshots and fork. Run by ctest
// (e2b_interpreter) with WARDEN_BIN_DIR; needs root, like every sandbox test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { importSdk, startWardend } from './wardend.mjs';

let wardend;
let Sandbox;
let sbx;  // one sandbox for the tests that need nothing of their own

before(async () => {
  wardend = await startWardend({ idBase: 11_000_000 });
  ({ Sandbox } = await importSdk());
  sbx = await Sandbox.create();
});

after(async () => {
  if (sbx) await sbx.kill().catch(() => {});
  if (wardend) await wardend.stop();
});

async function withSandbox(fn, opts) {
  const own = await Sandbox.create(opts);
  try {
    return await fn(own);
  } finally {
    await own.kill().catch(() => {});
  }
}

describe('cells', () => {
  test('an indented cell runs dedented', async () => {
    const r = await sbx.runCode(`
      a_ind = 2
      if a_ind:
          a_ind += 1
      a_ind * 10
      `);
    assert.equal(r.error, undefined);
    assert.equal(r.text, '30');
  });

  test('a string result comes unquoted, in Python and JavaScript', async () => {
    assert.equal((await sbx.runCode("'Hello' + ' World'")).text, 'Hello World');
    assert.equal((await sbx.runCode("'Hello' + ' World!'", { language: 'js' })).text, 'Hello World!');
    assert.equal((await sbx.runCode("await Promise.resolve('done')", { language: 'js' })).text, 'done');
    // Python shows "it's x" in double quotes: those go too. Text that only
    // starts with a quote keeps it.
    assert.equal((await sbx.runCode("\"it's\" + ' x'")).text, "it's x");
    assert.equal((await sbx.runCode("'\"a'")).text, '"a');
  });

  test('the default contexts include JavaScript, listed first', async () => {
    await withSandbox(async (own) => {
      const made = await own.createCodeContext({ language: 'python' });
      const contexts = await own.listCodeContexts();
      const languages = contexts.map((c) => c.language);
      assert.ok(languages.includes('python') && languages.includes('javascript'), languages.join());
      assert.equal(contexts[contexts.length - 1].id, made.id);
    });
  });

  test("a silent cell is governed by the SDK's timeout, and is interrupted by it", async () => {
    const started = Date.now();
    await assert.rejects(sbx.runCode('import time; time.sleep(300)', { timeoutMs: 2_000 }));
    assert.ok(Date.now() - started < 20_000, `the timeout took ${Date.now() - started} ms`);
    // The abandoned cell was interrupted: the next one runs.
    const r = await sbx.runCode('1 + 1', { timeoutMs: 30_000 });
    assert.equal(r.text, '2');
  });

  test('kill() ends a sandbox whose cell is silent', async () => {
    const own = await Sandbox.create();
    const running = own.runCode('import time; time.sleep(300)', { timeoutMs: 120_000 }).then(
      (r) => r, (e) => e);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const started = Date.now();
    await own.kill();
    const outcome = await running;
    assert.ok(Date.now() - started < 20_000, `the cell ended ${Date.now() - started} ms after kill()`);
    assert.ok(outcome instanceof Error || outcome.error, `the cell ended normally: ${JSON.stringify(outcome)}`);
  });
});

describe('rich results', () => {
  test('a DataFrame result carries its data', async () => {
    const r = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', None]})");
    assert.deepEqual(r.results[0].data, { a: [1, 2, 3], b: ['x', 'y', null] });
    assert.ok(r.results[0].html.includes('<table'));
  });

  const image = 'import numpy\nfrom PIL import Image\n' +
    "image = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype('uint8')).convert('RGBA')\n";

  test('PIL show() gives a PNG result', async () => {
    const r = await sbx.runCode(image + "image.show()\nprint('done')");
    assert.equal(Buffer.from(r.results[0].png, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.deepEqual(r.logs.stdout, ['done\n']);
  });

  test('PIL save() to a file gives a PNG result and saves it', async () => {
    const r = await sbx.runCode(image + "image.save('pil.png')");
    assert.equal(Buffer.from(r.results[0].png, 'base64').subarray(1, 4).toString(), 'PNG');
    const saved = await sbx.files.read('pil.png', { format: 'bytes' });
    assert.equal(Buffer.from(saved).subarray(1, 4).toString(), 'PNG');
  });
});

describe('charts', () => {
  async function chartOf(code) {
    const r = await sbx.runCode('import matplotlib.pyplot as plt\nimport numpy as np\n' + code + '\nplt.show()');
    assert.equal(r.error, undefined, r.error && r.error.traceback);
    assert.ok(r.results[0].png, 'no PNG');
    assert.deepEqual(r.results[0].extra, {});
    return r.results[0].chart;
  }

  test('a bar chart', async () => {
    const chart = await chartOf("plt.bar(['A', 'B'], [100, 200], label='Sold')\n" +
      "plt.xlabel('Authors')\nplt.ylabel('Books (count)')\nplt.title('Sales')");
    assert.equal(chart.type, 'bar');
    assert.deepEqual([chart.title, chart.x_label, chart.y_unit], ['Sales', 'Authors', 'count']);
    assert.deepEqual(chart.elements, [{ label: 'A', group: 'Sold', value: 100 }, { label: 'B', group: 'Sold', value: 200 }]);
  });

  test('a line chart with dates and a log scale', async () => {
    let chart = await chartOf('import datetime\n' +
      'dates = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(5)]\n' +
      "plt.plot(dates, np.arange(5), label='n')\nplt.xlabel('Time (s)')");
    assert.equal(chart.type, 'line');
    assert.deepEqual([chart.x_scale, chart.y_scale, chart.x_unit], ['datetime', 'linear', 's']);
    assert.equal(chart.elements[0].label, 'n');
    assert.deepEqual(chart.elements[0].points[0], ['2023-09-01', 0]);
    assert.ok(chart.x_ticks.every((t) => typeof t === 'string'));
    chart = await chartOf("plt.plot([1, 2, 3], [10, 100, 1000])\nplt.yscale('log')");
    assert.deepEqual([chart.x_scale, chart.y_scale], ['linear', 'log']);
  });

  test('scatter, pie and box-and-whisker charts', async () => {
    let chart = await chartOf("plt.scatter([1, 2], [3, 4], label='d')");
    assert.deepEqual([chart.type, chart.elements], ['scatter', [{ label: 'd', points: [[1, 3], [2, 4]] }]]);
    chart = await chartOf("plt.pie([90, 10], labels=['No', 'Yes'], startangle=90)");
    assert.deepEqual(chart.elements.map((e) => [e.label, e.angle, e.radius]), [['No', 324, 1], ['Yes', 36, 1]]);
    chart = await chartOf("plt.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'], patch_artist=True)");
    assert.equal(chart.type, 'box_and_whisker');
    assert.deepEqual(chart.elements.map((e) => [e.label, e.min, e.first_quartile, e.median, e.third_quartile, e.max, e.outliers]),
      [['A', 78, 85, 88, 90, 92, []], ['B', 84, 84.75, 88, 90.5, 95, [76]]]);
  });

  test('several axes make a superchart; other drawings are unknown', async () => {
    let chart = await chartOf("fig, axs = plt.subplots(1, 2)\nfig.suptitle('Two')\n" +
      "axs[0].plot([1, 2])\naxs[1].scatter([1], [2])");
    assert.deepEqual([chart.type, chart.title, chart.elements.map((c) => c.type)], ['superchart', 'Two', ['line', 'scatter']]);
    chart = await chartOf("fig, ax = plt.subplots()\nax.add_artist(plt.Circle((0, 0), 1))\nplt.title('Circle')");
    assert.deepEqual(chart, { type: 'unknown', title: 'Circle', elements: [] });
  });
});

describe('languages', () => {
  test('TypeScript, as a language and as a context, keeps its state', async () => {
    const out = await sbx.runCode('const tsMessage: string = "Hello World!"; console.log(tsMessage)', { language: 'ts' });
    assert.deepEqual(out.logs.stdout, ['Hello World!\n']);
    assert.equal((await sbx.runCode('tsMessage.length as number', { language: 'typescript' })).text, '12');
    const context = await sbx.createCodeContext({ language: 'ts' });
    assert.equal(context.language, 'typescript');
    await sbx.runCode('interface P { x: number }\nconst p: P = { x: 2 }', { context });
    assert.equal((await sbx.runCode('p.x * 21', { context })).text, '42');
  });

  test('R keeps its state and prints values as R does', async () => {
    await sbx.runCode('r_x <- 20', { language: 'r' });
    const r = await sbx.runCode('r_x * 2 + 2', { language: 'r' });
    assert.equal(r.text, '[1] 42');
    const failed = await sbx.runCode('stop("boom")', { language: 'r' });
    assert.equal(failed.error.value, 'boom');
  });

  test('Java (JShell) keeps its state', async () => {
    const context = await sbx.createCodeContext({ language: 'java' });
    assert.equal(context.language, 'java');
    await sbx.runCode('int javaX = 20;\nint twice(int a) { return 2 * a; }', { context });
    assert.equal((await sbx.runCode('twice(javaX) + 2', { context })).text, '42');
    assert.equal((await sbx.runCode('"abc" + "def"', { context })).text, 'abcdef');
    const failed = await sbx.runCode('1 / 0', { context });
    assert.equal(failed.error.name, 'ArithmeticException');
  });
});

describe('signed file URLs', () => {
  test('downloadUrl and uploadUrl work without the access token, until they expire', async () => {
    await withSandbox(async (own) => {
      await own.files.write('signed.txt', 'hello world');
      for (const opts of [{}, { useSignatureExpiration: 10_000 }, { user: 'root', useSignatureExpiration: 10_000 }]) {
        const url = await own.downloadUrl('signed.txt', opts);
        assert.match(url, /signature=v1_/);
        const res = await fetch(url);
        assert.equal(res.status, 200, JSON.stringify(opts));
        assert.equal(await res.text(), 'hello world');
      }
      const expired = await fetch(await own.downloadUrl('signed.txt', { useSignatureExpiration: -10_000 }));
      assert.equal(expired.status, 401);
      assert.deepEqual(await expired.json(), { code: 401, message: 'signature is already expired' });

      const form = new FormData();
      form.append('file', 'uploaded content');
      const up = await fetch(await own.uploadUrl('up.txt', { useSignatureExpiration: 10_000 }), { method: 'POST', body: form });
      assert.equal(up.status, 200);
      assert.deepEqual(await up.json(), [{ name: 'up.txt', path: '/home/user/up.txt', type: 'file' }]);
      assert.equal(await own.files.read('up.txt'), 'uploaded content');
    }, { secure: true });
  });

  test('a forged, altered or reused signature is refused', async () => {
    const url = new URL(await sbx.downloadUrl('forged.txt'));
    // Another path than the one signed.
    url.searchParams.set('path', 'other.txt');
    assert.equal((await fetch(url)).status, 401);
    // A read URL used to write.
    const read = await sbx.downloadUrl('forged.txt');
    assert.equal((await fetch(read, { method: 'POST', body: new FormData() })).status, 401);
    // No signature at all, no token: not this server's to serve.
    const bare = new URL(read);
    bare.searchParams.delete('signature');
    assert.notEqual((await fetch(bare)).status, 200);
  });
});

describe('metrics', () => {
  test('getMetrics reports what the sandbox uses, within the asked range', async () => {
    await withSandbox(async (own) => {
      const start = new Date();
      await own.runCode('x = bytearray(20 << 20); sum(range(2_000_000))');
      const [m] = await own.getMetrics({ start, end: new Date() });
      assert.ok(m, 'no sample');
      assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal, JSON.stringify(m));
      assert.equal(m.memTotal, 512 * 1024 * 1024);
      assert.ok(m.cpuCount >= 1 && m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, JSON.stringify(m));
      assert.ok(m.diskTotal > 0 && m.diskUsed >= 0, JSON.stringify(m));
      assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60_000);
      const before = await own.getMetrics({ start: new Date(start - 3_600_000), end: new Date(start - 1_800_000) });
      assert.deepEqual(before, []);
      // The SDK rounds `start` to the nearest second: a range from the second
      // half of this second on (rounded up to the next) still holds a sample now.
      while (Date.now() % 1000 < 500 || Date.now() % 1000 > 700) await new Promise((r) => setTimeout(r, 10));
      const [rounded] = await own.getMetrics({ start: new Date() });
      assert.ok(rounded, 'no sample for a start the SDK rounded up');
    });
  });
});

describe('pause, snapshots, fork', () => {
  test('pause() freezes the sandbox, connect() resumes it with its processes and state', async () => {
    await withSandbox(async (own) => {
      await own.runCode('kept = 41');
      const sleeper = await own.commands.run('sleep 3600', { background: true });
      assert.equal(await own.pause(), true);
      assert.equal(await own.isRunning(), false);
      assert.equal(await own.pause(), false);  // already paused
      const info = await Sandbox.getInfo(own.sandboxId);
      assert.equal(info.state, 'paused');
      const resumed = await own.connect();
      assert.equal(resumed.sandboxId, own.sandboxId);
      assert.equal(await own.isRunning(), true);
      assert.equal((await own.runCode('kept + 1')).text, '42');
      assert.ok((await own.commands.list()).some((c) => c.pid === sleeper.pid));
    });
  });

  test('a filesystem-only pause keeps the files and starts the interpreters afresh', async () => {
    await withSandbox(async (own) => {
      await own.files.write('/home/user/fs_only.txt', 'still here');
      await own.runCode('gone = 1');
      await own.pause({ keepMemory: false });
      assert.equal(await own.isRunning(), false);
      await own.connect();
      assert.equal(await own.files.read('/home/user/fs_only.txt'), 'still here');
      assert.equal((await own.runCode('gone')).error.name, 'NameError');
    });
  });

  test('auto-pause at the timeout, and auto-resume on the next request', async () => {
    const own = await Sandbox.create({ timeoutMs: 1_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
    try {
      await own.runCode('kept = 7');
      const deadline = Date.now() + 30_000;
      while ((await Sandbox.getInfo(own.sandboxId)).state !== 'paused' && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal((await Sandbox.getInfo(own.sandboxId)).state, 'paused');
      assert.equal((await own.runCode('kept * 6')).text, '42');  // resumed by the request
    } finally {
      await own.kill().catch(() => {});
    }
  });

  test('createSnapshot, create from it (twice, independently), list and delete', async () => {
    await withSandbox(async (own) => {
      await own.files.write('/home/user/snap.txt', 'snapshot content');
      await own.runCode('snapped = 41');
      const snapshot = await own.createSnapshot({ name: 'interp-snap' });
      assert.match(snapshot.snapshotId, /^snap-/);
      assert.deepEqual(snapshot.names, ['interp-snap']);
      try {
        const a = await Sandbox.create(snapshot.snapshotId);
        const b = await Sandbox.create(snapshot.snapshotId);
        try {
          assert.equal(await a.files.read('/home/user/snap.txt'), 'snapshot content');
          assert.equal((await a.runCode('snapped + 1')).text, '42');
          await a.files.write('/home/user/snap.txt', 'changed in a');
          assert.equal(await b.files.read('/home/user/snap.txt'), 'snapshot content');
        } finally {
          await a.kill();
          await b.kill();
        }
        const listed = await Sandbox.listSnapshots({ name: 'interp-snap' }).nextItems();
        assert.ok(listed.some((s) => s.snapshotId === snapshot.snapshotId));
        const mine = await own.listSnapshots().nextItems();
        assert.ok(mine.some((s) => s.snapshotId === snapshot.snapshotId));
      } finally {
        assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId), true);
      }
      assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId), false);
    });
  });

  test('fork gives independent sandboxes with the files and state', async () => {
    await withSandbox(async (own) => {
      await own.files.write('/home/user/state.txt', 'before fork');
      await own.runCode('forked = 41');
      const forks = await own.fork({ count: 2 });
      assert.equal(forks.length, 2);
      try {
        for (const fork of forks) {
          assert.notEqual(fork.sandboxId, own.sandboxId);
          assert.equal(await fork.files.read('/home/user/state.txt'), 'before fork');
          assert.equal((await fork.runCode('forked + 1')).text, '42');
        }
        await forks[0].files.write('/home/user/state.txt', 'in the fork');
        assert.equal(await own.files.read('/home/user/state.txt'), 'before fork');
      } finally {
        await Promise.all(forks.map((f) => f.kill()));
      }
    });
  });
});
