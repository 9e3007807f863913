'use strict';
// Warden's JavaScript kernel: a live node interpreter driven over the kernel
// protocol (docs/kernel-protocol.md). Run as `node warden_kernel.js` inside the
// sandbox, cwd /workspace, with the channel on $WARDEN_CHANNEL_FD (3).
//
// Responsible for: reading `execute <id> <nbytes>\n<code>` frames from the
// channel, running each cell in one persistent global scope, and answering
// with `<nbytes>\n<json>` frames (ready, execute_result, error, done). Cell
// output goes straight to fds 1/2 through the ordinary console/process.stdout,
// which node writes synchronously for pipes and files on Linux: when a cell's
// code returns, its output is already in the pipe, so `done` can follow at once.
//
// How a cell runs: through the V8 inspector (in-process inspector.Session),
// `Runtime.evaluate` with `replMode: true`, the mode Chrome's DevTools console
// uses. V8 itself then gives console semantics without any source rewriting:
//   - top-level `let`/`const`/`class`/`function` persist in the global
//     script scope, also for a cell that awaits (no acorn, no REPL rewrite);
//   - top-level `await` works; the completion value of the last statement is
//     the result;
//   - re-declaring `let`/`const`/`class` in a later cell is allowed (it
//     replaces the binding, as in Chrome); inside one cell it is still a
//     SyntaxError.
// The cell runs in node's main context, not in a vm context: objects made by
// node's own modules (fs results, errors, promises) and by user code then share
// intrinsics, so `e instanceof Error` and assert.deepStrictEqual behave as in a
// script. `require` (resolving from the cwd at start-up, /workspace), `module`,
// and lazy globals for node's builtin modules (`fs`, `path`, `child_process`,
// ... as in node's REPL) are added to the global object; console, process,
// Buffer, URL, TextEncoder, timers etc. are node's own globals.
//
// Results: `text/plain` is util.inspect(value) (node REPL defaults), plus
// `application/json` for plain JSON-able objects and arrays. A promise as the
// final value is awaited. undefined gives no execute_result.
//
// Errors: ename = err.name, evalue = err.message, traceback = err.stack lines
// with the kernel's frames (below the inspector call) cut off. Scripts are named
// with `//# sourceURL=<cell-N>` (V8 rejects spaces there) and shown as
// `<cell N>` in tracebacks. A non-Error thrown value gives ename "Error",
// evalue = util.inspect(value), traceback ["Uncaught <value>"]. Syntax errors
// get a `<cell N>:line` / source line / caret traceback like node's.
//
// Interrupts (SIGINT to the process group): the synchronous part of a cell runs
// inside vm.Script#runInThisContext({breakOnSigint: true}), whose watchdog
// terminates the running JS (`while (true) {}`) -> ename "Interrupted", status
// interrupted. While the cell awaits a promise, a process 'SIGINT' listener
// abandons it (the promise keeps running in the background; its outcome is
// dropped). Limitation: JS that runs synchronously *after* an await (a promise
// continuation run from the event loop, e.g. `await x; while (true) {}`) is not
// under the watchdog and cannot be interrupted; the supervisor's grace-period
// kill then ends the session. SIGINT between cells is ignored.
//
// Uncaught exceptions and unhandled rejections from timers/callbacks (between
// or during cells) are printed to stderr and never end the kernel. A cell that
// calls process.exit() ends the kernel (the supervisor reports the session
// lost). Frames are written with a net.Socket on the channel fd (libuv marks it
// close-on-exec, so child processes do not inherit the channel); cells are run
// one at a time, in arrival order.

const fs = require('fs');
const inspector = require('inspector');
const Module = require('module');
const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');

// Primordials the kernel uses after user code may have replaced the globals.
const jsonStringify = JSON.stringify;
const jsonParse = JSON.parse;
const { isNativeError, isPromise } = util.types;
const inspect = util.inspect;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const ObjectKeys = Object.keys;
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;
const ArrayIsArray = Array.isArray;
const PromisePrototypeThen = Promise.prototype.then;
const NumberIsFinite = Number.isFinite;
const BufferFrom = Buffer.from;
const BufferConcat = Buffer.concat;
const stderrWrite = process.stderr.write.bind(process.stderr);

const CHANNEL_FD = Number(process.env.WARDEN_CHANNEL_FD || 3);
const MAX_FRAME = 64 * 1024 * 1024;
const JSON_MAX_NODES = 100000;
const KERNEL_FILE = __filename;
const HIDDEN = '__warden_kernel__';  // global the runner script reaches us by

// ---------------------------------------------------------------- channel --

const channel = new net.Socket({ fd: CHANNEL_FD, readable: true, writable: true });

function frame(message) {
  let body = BufferFrom(jsonStringify(message), 'utf8');
  if (body.length > MAX_FRAME) {
    // Only results can be this big: keep a truncated text/plain.
    const data = message.data || {};
    const text = String(data['text/plain'] || '').slice(0, 1 << 20);
    message.data = { 'text/plain': text + '\n... (result truncated: frame over 64 MiB)' };
    body = BufferFrom(jsonStringify(message), 'utf8');
  }
  return BufferConcat([BufferFrom(body.length + '\n', 'latin1'), body]);
}

// A cell's frames go out in one write together with its done frame: the
// supervisor has nothing to do with a result before done.
function send(message) {
  channel.write(frame(message));
}

let inbuf = Buffer.alloc(0);
const queue = [];

channel.on('data', (chunk) => {
  inbuf = inbuf.length ? BufferConcat([inbuf, chunk]) : chunk;
  for (;;) {
    const nl = inbuf.indexOf(10);
    if (nl < 0) {
      if (inbuf.length > 256) protocolError('header too long');
      break;
    }
    const header = inbuf.toString('latin1', 0, nl);
    const m = /^execute (\d+) (\d+)$/.exec(header);
    if (!m) protocolError('bad header ' + jsonStringify(header));
    const size = Number(m[2]);
    if (inbuf.length < nl + 1 + size) break;
    const code = inbuf.toString('utf8', nl + 1, nl + 1 + size);
    inbuf = inbuf.subarray(nl + 1 + size);
    queue.push({ id: Number(m[1]), code });
  }
  if (!current) runNext();
});
channel.on('end', () => process.exit(0));
channel.on('error', (err) => {
  stderrWrite(`warden kernel: channel error: ${err.message}\n`);
  process.exit(1);
});

function protocolError(what) {
  stderrWrite(`warden kernel: protocol error: ${what}\n`);
  process.exit(2);
}

// --------------------------------------------------------------- evaluate --

const session = new inspector.Session();
session.connect();

// Synchronous posts (everything but the REPL-mode evaluate) answer before
// post() returns.
function postSync(method, params) {
  let error = null;
  let result = null;
  session.post(method, params, (err, res) => { error = err; result = res; });
  if (error) throw error;
  return result;
}

// The runner script is what breakOnSigint watches: it calls back into the
// kernel, which starts the evaluate; the user's synchronous code runs inside.
let pendingEvaluate = null;
let taken;
Object.defineProperty(globalThis, HIDDEN, {
  value: Object.freeze({
    run() { const f = pendingEvaluate; pendingEvaluate = null; f(); },
    take(v) { taken = v; },
  }),
  enumerable: false, writable: false, configurable: false,
});
const runner = new vm.Script(`${HIDDEN}.run()`, { filename: 'warden-kernel-runner' });

// The JS value behind an inspector RemoteObject.
function remoteValue(ro) {
  if (ro.objectId === undefined) {
    if ('unserializableValue' in ro) {
      const u = ro.unserializableValue;
      if (u.endsWith('n')) return BigInt(u.slice(0, -1));
      return Number(u);  // NaN, Infinity, -Infinity, -0
    }
    return ro.value;  // undefined, null, booleans, numbers, strings
  }
  taken = undefined;
  postSync('Runtime.callFunctionOn', {
    objectId: ro.objectId,
    functionDeclaration: `function () { 'use strict'; ${HIDDEN}.take(this); }`,
    silent: true,
  });
  const v = taken;
  taken = undefined;
  return v;
}

// ------------------------------------------------------------------ cells --

let executionCount = 0;
let current = null;  // the running cell: {id, count, n, settled}

function runNext() {
  while (!current && queue.length) startCell(queue.shift());
}

// Cells like `{a: 1, b: 2}` mean an object, as in node's REPL and Chrome.
function maybeObjectLiteral(code) {
  const t = code.trim();
  if (!(t.startsWith('{') && t.endsWith('}'))) return code;
  try {
    new vm.Script(`(async () => (${code}\n))`);  // compiles only; await allowed
    return `(${code}\n)`;
  } catch {
    return code;
  }
}

function startCell({ id, code }) {
  const count = ++executionCount;
  const cell = { id, count, settled: false, code, frames: [] };
  current = cell;
  const expression = `${maybeObjectLiteral(code)}\n//# sourceURL=<cell-${count}>`;
  pendingEvaluate = () => session.post('Runtime.evaluate', {
    expression, replMode: true, silent: true, objectGroup: 'warden',
  }, (err, res) => onEvaluated(cell, err, res));
  try {
    runner.runInThisContext({ breakOnSigint: true, displayErrors: false });
  } catch (err) {
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      interrupt(cell);
    } else {
      finishWithError(cell, err, null);
    }
  }
}

function onEvaluated(cell, err, res) {
  if (cell.settled) return;
  if (err) {
    finishWithError(cell, err, null);
    return;
  }
  let value;
  try {
    if (res.exceptionDetails) {
      const exc = res.exceptionDetails.exception;
      value = exc ? remoteValue(exc) : new Error(res.exceptionDetails.text);
      postSync('Runtime.releaseObjectGroup', { objectGroup: 'warden' });
      finishWithError(cell, value, res.exceptionDetails);
      return;
    }
    value = remoteValue(res.result);
    postSync('Runtime.releaseObjectGroup', { objectGroup: 'warden' });
  } catch (e) {
    finishWithError(cell, e, null);
    return;
  }
  if (isPromise(value)) {
    cell.awaiting = true;
    PromisePrototypeThen.call(value,
      (v) => { if (!cell.settled) finishWithValue(cell, v); },
      (e) => { if (!cell.settled) finishWithError(cell, e, null); });
    return;
  }
  finishWithValue(cell, value);
}

function finish(cell, status) {
  cell.settled = true;
  if (current === cell) current = null;
  cell.frames.push(frame({ type: 'done', id: cell.id, execution_count: cell.count, status }));
  channel.write(cell.frames.length === 1 ? cell.frames[0] : BufferConcat(cell.frames));
  // The next queued cell starts from a fresh macrotask, not inside this
  // cell's promise reactions.
  if (queue.length) setImmediate(runNext);
}

function finishWithValue(cell, value) {
  if (value !== undefined) {
    let data;
    try {
      data = mimeBundle(value);
    } catch (e) {
      finishWithError(cell, e, null);
      return;
    }
    cell.frames.push(frame({ type: 'execute_result', id: cell.id, execution_count: cell.count, data }));
  }
  finish(cell, 'ok');
}

function mimeBundle(value) {
  const data = { 'text/plain': inspect(value) };
  if (value !== null && typeof value === 'object' && isPlainJson(value)) {
    data['application/json'] = value;
  }
  return data;
}

// Plain objects/arrays of strings, finite numbers, booleans and null, without
// cycles or accessors: what JSON.stringify would keep unchanged.
function isPlainJson(root) {
  let budget = JSON_MAX_NODES;
  const ancestors = new Set();
  function ok(v, depth) {
    if (--budget < 0 || depth > 100) return false;
    if (v === null) return true;
    switch (typeof v) {
      case 'string': case 'boolean': return true;
      case 'number': return NumberIsFinite(v);
      case 'object': break;
      default: return false;
    }
    if (ancestors.has(v)) return false;
    const proto = ObjectGetPrototypeOf(v);
    let keys;
    if (ArrayIsArray(v)) {
      if (proto !== ArrayPrototype) return false;
      keys = ObjectKeys(v);
      if (keys.length !== v.length) return false;  // holes or extra keys
    } else if (proto === ObjectPrototype || proto === null) {
      keys = ObjectKeys(v);
    } else {
      return false;
    }
    ancestors.add(v);
    for (const k of keys) {
      const d = ObjectGetOwnPropertyDescriptor(v, k);
      if (!d || !('value' in d) || !ok(d.value, depth + 1)) return false;
    }
    ancestors.delete(v);
    return true;
  }
  return ok(root, 0);
}

function interrupt(cell) {
  if (cell.settled) return;
  cell.frames.push(frame({
    type: 'error', id: cell.id, ename: 'Interrupted',
    evalue: 'Execution interrupted by SIGINT',
    traceback: ['Interrupted: execution interrupted by SIGINT'],
  }));
  finish(cell, 'interrupted');
}

function finishWithError(cell, err, details) {
  if (cell.settled) return;
  let report;
  try {
    report = describeError(cell, err, details);
  } catch (e) {
    report = { ename: 'Error', evalue: 'unprintable exception', traceback: [] };
  }
  cell.frames.push(frame({ type: 'error', id: cell.id, ...report }));
  finish(cell, 'error');
}

function safeString(f) {
  try { return String(f()); } catch { return ''; }
}

const CELL_NAME = /<cell-(\d+)>/g;
// The first frame below the user's code: the inspector call made by the kernel.
const KERNEL_FRAME = /^\s+at (?:.*\(node:inspector:|.*warden-kernel-runner|.*\(node:vm:)/;

function describeError(cell, err, details) {
  const errorLike = isNativeError(err) ||
    (err !== null && typeof err === 'object' && typeof err.message === 'string' &&
     typeof err.stack === 'string');
  if (!errorLike) {
    const shown = safeString(() => inspect(err));
    return { ename: 'Error', evalue: shown, traceback: [`Uncaught ${shown}`] };
  }
  const ename = safeString(() => err.name) || 'Error';
  const evalue = safeString(() => err.message);
  let lines = safeString(() => err.stack).split('\n');
  const cut = lines.findIndex((l) => KERNEL_FRAME.test(l) || l.includes(KERNEL_FILE));
  if (cut >= 0) lines = lines.slice(0, cut);
  const hasUserFrame = lines.some((l) => /^\s+at /.test(l));
  if (ename === 'SyntaxError' && !hasUserFrame && details && details.scriptId !== undefined) {
    // A compile error: show where, like node does for scripts.
    const lineNo = details.lineNumber || 0;
    const source = cell.code.split('\n')[lineNo];
    if (source !== undefined) {
      lines = [`<cell ${cell.count}>:${lineNo + 1}`, source,
        ' '.repeat(details.columnNumber || 0) + '^', '', ...lines];
    }
  }
  lines = lines.map((l) => l.replace(CELL_NAME, '<cell $1>'));
  return { ename, evalue, traceback: lines };
}

// SIGINT: during the synchronous part the runner's watchdog owns the signal
// (vm removes this listener meanwhile); here it abandons an awaited cell and
// is otherwise ignored.
process.on('SIGINT', () => {
  if (current && !current.settled) {
    const cell = current;
    interrupt(cell);
  }
});

// Errors nobody waits for (a throwing timer, a rejected promise nobody
// handles): reported on stderr, whichever cell is running then.
function logStray(prefix, err) {
  let text;
  if (isNativeError(err)) {
    text = describeError({ code: '' }, err, null).traceback.join('\n');
  } else {
    text = safeString(() => inspect(err)).replace(CELL_NAME, '<cell $1>');
  }
  stderrWrite(`${prefix}${text}\n`);
}
process.on('uncaughtException', (err) => logStray('Uncaught ', err));
process.on('unhandledRejection', (reason) => logStray('Unhandled promise rejection: ', reason));

// ---------------------------------------------------------- user globals --

function defineGlobals() {
  const userRequire = Module.createRequire(path.join(process.cwd(), '<cell>'));
  const userModule = new Module('<cell>');
  userModule.filename = path.join(process.cwd(), '<cell>');
  userModule.paths = Module._nodeModulePaths(process.cwd());
  const plain = (name, value) => Object.defineProperty(globalThis, name, {
    value, writable: true, configurable: true, enumerable: false,
  });
  plain('require', userRequire);
  plain('module', userModule);
  plain('exports', userModule.exports);
  // Builtin modules as lazy globals, like node's REPL (`fs.readFileSync(...)`).
  for (const name of Module.builtinModules) {
    if (name.startsWith('_') || name.includes('/') || name in globalThis) continue;
    Object.defineProperty(globalThis, name, {
      get() {
        const lib = userRequire(name);
        plain(name, lib);
        return lib;
      },
      set(v) { plain(name, v); },
      configurable: true, enumerable: false,
    });
  }
}
defineGlobals();

send({ type: 'ready', language: 'javascript', version: process.versions.node });
