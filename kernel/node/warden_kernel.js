'use strict';
// Warden's JavaScript kernel: a live node interpreter driven over the kernel
// protocol (docs/kernel-protocol.md). Run as `node warden_kernel.js` inside the
// sandbox, cwd /workspace, with the channel on $WARDEN_CHANNEL_FD (3).
//
// Responsible for: reading `execute <id> <nbytes>\n<code>` frames from the
// channel, running each cell in one persistent global scope, and answering
// with `<nbytes>\n<json>` frames (ready, execute_result, error, done). Cell
// output goes straight to fds 1/2 through the ordinary console/process.stdout.
// node writes pipes synchronously while they have room and queues the rest;
// `done` waits until those queues are empty (afterOutputFlushed), so a cell's
// output is in the pipes before its done frame.
//
// How a cell runs: through the V8 inspector (in-process inspector.Session),
// `Runtime.evaluate` with `replMode: true`, the mode Chrome's DevTools console
// uses. V8 itself then gives console semantics without a parser (no acorn, no
// REPL-style rewrite of declarations):
//   - top-level `let`/`const`/`class`/`function` persist in the global
//     script scope, also in a cell that awaits;
//   - top-level `await` works; the completion value of the last statement is
//     the result;
//   - re-declaring `let`/`const`/`class` in a later cell is allowed (it
//     replaces the binding, as in Chrome); within one cell it is still a
//     SyntaxError.
// The one rewrite: scripts compiled by the inspector cannot `import()` (no
// module referrer), so a small scanner (skipping strings, comments, template
// text) turns `import(x)` into a call of the kernel's importer, which resolves
// from the cwd like a module there would, and top-level static imports
// (`import fs, { readFileSync as r } from 'fs'`) into `const ... = await
// import(...)`. A cell `{a: 1}` (braces only) is taken as an object literal,
// as in node's REPL and Chrome.
//
// The cell runs in node's main context, not in a vm context: objects made by
// node's own modules (fs results, errors, promises) and by user code then share
// intrinsics, so `e instanceof Error` and assert.deepStrictEqual behave as in a
// script. `require` (resolving from the cwd at start-up, /workspace), `module`,
// `exports`, and lazy globals for node's builtin modules (`fs`, `path`,
// `child_process`, ... as in node's REPL) are added to the global object;
// console, process, Buffer, URL, TextEncoder, timers etc. are node's own. The
// kernel keeps its own references to what it uses (JSON.stringify, ...), so a
// cell that replaces globals only breaks itself.
//
// Results: `text/plain` is util.inspect(value) (node REPL defaults), plus
// `application/json` for plain JSON-able objects and arrays. A promise as the
// final value is awaited. undefined gives no execute_result.
//
// Errors: ename = err.name, evalue = err.message, traceback = err.stack lines
// with the kernel's frames (below the inspector call) cut off. Scripts are named
// with `//# sourceURL=<cell-N>` (V8 rejects spaces there) and shown as
// `<cell N>` in tracebacks (err.stack seen by the cell itself says <cell-N>).
// A non-Error thrown value gives ename "Error", evalue = util.inspect(value),
// traceback ["Uncaught <value>"]. Syntax errors get a `<cell N>:line` /
// source line / caret traceback like node's.
//
// Interrupts (SIGINT to the process group): the synchronous part of a cell runs
// inside vm.Script#runInThisContext({breakOnSigint: true}), whose watchdog
// terminates the running JS (`while (true) {}`) -> ename "Interrupted", status
// interrupted. While the cell awaits a promise, a process 'SIGINT' listener
// abandons it (the promise keeps running in the background; its outcome is
// dropped). SIGINT between cells is ignored. Limitations:
//   - JS that runs synchronously *after* an await (a promise continuation run
//     from the event loop, e.g. `await x; while (true) {}`) is not under the
//     watchdog and cannot be interrupted; the supervisor's grace-period kill
//     then ends the session.
//   - When node's watchdog stops (end of each cell's synchronous part) it
//     installs node's default SIGINT handler, which exits, until the kernel
//     has re-added its listener (see reinstallSigintListeners): a SIGINT in
//     those ~40-90 us kills the kernel. Harmless for real interrupts (they
//     come while a cell runs, not exactly as its synchronous part ends), but
//     a test flooding the kernel with SIGINTs every 0.3 ms kills it within a
//     few cells. (Tried and dropped: a worker thread parked in its own
//     breakOnSigint call to keep the watchdog up for good - node then lost
//     SIGINTs; and terminating the main thread from a worker via the inspector
//     - node aborts on a corrupted async-hook stack.)
//   - The watchdog starts and joins a thread per cell (~100 us of CPU, about
//     a quarter of a trivial cell's cost).
//
// Uncaught exceptions and unhandled rejections from timers/callbacks (between
// or during cells) are printed to stderr and never end the kernel.
// process.exit() ends the cell, not the kernel (see ExitRequest). Frames are
// written with a net.Socket on the channel fd (libuv marks it close-on-exec,
// so child processes do not inherit the channel); a cell's frames go out in
// one write with its done frame. Cells run one at a time, in arrival order.

const inspector = require('inspector');
const Module = require('module');
const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');

// Primordials the kernel uses after user code may have replaced the globals.
const jsonStringify = JSON.stringify;
const { isNativeError, isPromise } = util.types;
const inspect = util.inspect;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const ObjectKeys = Object.keys;
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;
const ArrayIsArray = Array.isArray;
const PromisePrototypeThen = Promise.prototype.then;
const ReflectApply = Reflect.apply;
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

// The ready frame; a cell's frames go out in one write with its done frame
// (see finish).
function send(message) {
  channel.write(frame(message));
}

// Incoming frames: chunks are kept in a list and joined once a whole frame
// is there (no quadratic copying for big cells).
let pending = [];
let pendingBytes = 0;
let header = null;  // {id, size} once the current frame's header is parsed
const queue = [];

function joined() {
  if (pending.length > 1) pending = [BufferConcat(pending, pendingBytes)];
  return pending[0];
}

function take(n) {
  const all = pending.length === 1 ? pending[0] : BufferConcat(pending, pendingBytes);
  pending = all.length > n ? [all.subarray(n)] : [];
  pendingBytes = all.length - n;
  return all.subarray(0, n);
}

channel.on('data', (chunk) => {
  pending.push(chunk);
  pendingBytes += chunk.length;
  for (;;) {
    if (header === null) {
      if (pendingBytes === 0) break;
      const nl = joined().indexOf(10);
      if (nl < 0) {
        if (pendingBytes > 256) protocolError('header too long');
        break;
      }
      const line = take(nl + 1).toString('latin1', 0, nl);
      const m = /^(execute|env) (\d+) (\d+)$/.exec(line);
      if (!m) protocolError('bad header ' + jsonStringify(line));
      header = { verb: m[1], id: Number(m[2]), size: Number(m[3]) };
    }
    if (pendingBytes < header.size) break;
    if (header.verb === 'env') {
      cellEnv = { id: header.id, vars: parseEnv(take(header.size)) };
    } else {
      const env = cellEnv && cellEnv.id === header.id ? cellEnv.vars : null;
      cellEnv = null;
      queue.push({ id: header.id, code: take(header.size).toString('utf8'), env });
    }
    header = null;
  }
  if (!current) runNext();
});
channel.on('end', () => realExit(0));
channel.on('error', (err) => {
  stderrWrite(`warden kernel: channel error: ${err.message}\n`);
  realExit(1);
});

// `env <id> <nbytes>`, before the `execute` of the same id: variables for
// that cell only, each as `<length>:<KEY=value>`.
let cellEnv = null;
function parseEnv(bytes) {
  const vars = [];
  let i = 0;
  while (i < bytes.length) {
    const colon = bytes.indexOf(58, i);
    if (colon < 0) protocolError('bad env frame');
    const n = Number(bytes.toString('latin1', i, colon));
    const entry = bytes.toString('utf8', colon + 1, colon + 1 + n);
    const eq = entry.indexOf('=');
    vars.push([entry.slice(0, eq), entry.slice(eq + 1)]);
    i = colon + 1 + n;
  }
  return vars;
}

function protocolError(what) {
  stderrWrite(`warden kernel: protocol error: ${what}\n`);
  realExit(2);
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
    run() {
      hideSigintListeners = false;
      const f = pendingEvaluate;
      pendingEvaluate = null;
      f();
    },
    take(v) { taken = v; },
    import: (specifier, options) => userImport(specifier, options),
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

// ---------------------------------------------------------------- imports --

// Scripts compiled by the inspector have no module referrer, so V8's
// `import()` fails there (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING). Cells are
// rewritten to call this instead: a function compiled as a vm.Script named
// after the cwd, whose import() resolves like a module there would (relative
// paths, /workspace/node_modules, builtins, ESM and CJS).
let importer = null;
function userImport(specifier, options) {
  if (!importer) {
    importer = new vm.Script('(s, o) => import(s, o)', {
      filename: path.join(process.cwd(), '<cell>'),
      importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    }).runInThisContext();
  }
  // Node flags that loader as experimental, once, on first use: not the
  // user's business.
  const saved = process.emitWarning;
  process.emitWarning = function emitWarning(warning, ...rest) {
    if (String(warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
    return ReflectApply(saved, this, [warning, ...rest]);
  };
  try {
    return importer(specifier, options);
  } finally {
    process.emitWarning = saved;
  }
}

const IMPORT_CALL = `${HIDDEN}.import`;
// `import x from 'm'` and friends (module syntax, invalid in a script):
const STATIC_IMPORT = /import\s*(?:([\w$]+)\s*(?:,\s*)?)?(?:\*\s*as\s+([\w$]+)|\{([^}]*)\})?\s*from\s*(['"])([^'"\n]+)\4[ \t]*;?|import\s*(['"])([^'"\n]+)\6[ \t]*;?/y;

function staticImport(m) {
  const [, def, ns, named, , from, , bare] = m;
  if (bare !== undefined) return `await ${IMPORT_CALL}(${jsonStringify(bare)});`;
  const mod = `await ${IMPORT_CALL}(${jsonStringify(from)})`;
  if (ns !== undefined) {
    return def ? `const ${ns} = ${mod}, ${def} = ${ns}.default;` : `const ${ns} = ${mod};`;
  }
  const parts = [];
  if (def) parts.push(`default: ${def}`);
  if (named !== undefined) {
    for (const item of named.split(',')) {
      const t = item.trim();
      if (t) parts.push(t.replace(/^([\w$]+|'[^']*'|"[^"]*")\s+as\s+([\w$]+)$/, '$1: $2'));
    }
  }
  return `const { ${parts.join(', ')} } = ${mod};`;
}

// `import(a) {` is a method named import (`{ import() {} }`), not a call.
function isMethodDefinition(code, open) {
  let level = 0;
  for (let k = open; k < code.length; k++) {
    const c = code[k];
    if (c === '(') level++;
    else if (c === ')' && --level === 0) {
      const rest = /^\s*(.)/.exec(code.slice(k + 1, k + 200));
      return rest !== null && rest[1] === '{';
    }
  }
  return false;
}

// Rewrites `import(...)` to the kernel's importer and top-level static
// imports to `const ... = await import(...)`. A small scanner skips strings,
// comments, template text and regex literals (told from division by the
// previous character, the usual heuristic).
function rewriteImports(code) {
  if (!code.includes('import')) return code;
  const n = code.length;
  const templates = [];  // brace depths at which an enclosing template resumes
  let out = '';
  let copied = 0;
  let depth = 0;
  let prev = '';  // previous significant character of code
  let newline = true;  // a newline since `prev`
  let i = 0;
  const template = () => {  // i is just after a backquote or a closing brace
    while (i < n) {
      const c = code[i];
      if (c === '\\') { i += 2; continue; }
      if (c === '`') { i++; return; }
      if (c === '$' && code[i + 1] === '{') { i += 2; templates.push(depth++); return; }
      i++;
    }
  };
  while (i < n) {
    const c = code[i];
    if (c === '/' && code[i + 1] === '/') {
      const e = code.indexOf('\n', i);
      i = e < 0 ? n : e;
      continue;
    }
    if (c === '/' && code[i + 1] === '*') {
      const e = code.indexOf('*/', i + 2);
      i = e < 0 ? n : e + 2;
      continue;
    }
    if (c === '/' && (prev === '' || '(,=:[!&|?{};+-*%<>~^'.includes(prev))) {
      // A regex literal: up to the closing slash, outside character classes.
      let klass = false;
      i++;
      while (i < n && code[i] !== '\n') {
        const d = code[i];
        if (d === '\\') { i += 2; continue; }
        if (d === '[') klass = true;
        else if (d === ']') klass = false;
        else if (d === '/' && !klass) break;
        i++;
      }
      i++;
      prev = 'a'; newline = false;
      continue;
    }
    if (c === '\'' || c === '"') {
      i++;
      while (i < n && code[i] !== c && code[i] !== '\n') i += code[i] === '\\' ? 2 : 1;
      i++;
      prev = c; newline = false;
      continue;
    }
    if (c === '`') { i++; template(); prev = c; newline = false; continue; }
    if (c === '{') { depth++; }
    if (c === '}') {
      depth--;
      if (templates.length && templates[templates.length - 1] === depth) {
        templates.pop();
        i++;
        template();
        prev = '`'; newline = false;
        continue;
      }
    }
    if (/[A-Za-z_$]/.test(c)) {
      let e = i + 1;
      while (e < n && /[\w$]/.test(code[e])) e++;
      if (e - i === 6 && code.startsWith('import', i) && prev !== '.') {
        let j = e;
        while (j < n && /\s/.test(code[j])) j++;
        if (code[j] === '(' && !isMethodDefinition(code, j)) {
          out += code.slice(copied, i) + IMPORT_CALL;
          copied = e;
        } else if (prev === '' || prev === ';' || prev === '}' || prev === '{' || newline) {
          STATIC_IMPORT.lastIndex = i;
          const m = STATIC_IMPORT.exec(code);
          if (m) {
            out += code.slice(copied, i) + staticImport(m);
            copied = i = STATIC_IMPORT.lastIndex;
            prev = ';'; newline = false;
            continue;
          }
        }
      }
      i = e;
      prev = 'a'; newline = false;
      continue;
    }
    if (c === '\n') newline = true;
    else if (!/\s/.test(c)) { prev = c; newline = false; }
    i++;
  }
  return copied === 0 ? code : out + code.slice(copied);
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

// TypeScript (`node warden_kernel.js --typescript`): each cell is
// transpiled to JavaScript first (Debian's typescript module, loaded on the
// first cell; types are stripped, not checked, as ts-node's transpile-only
// mode and E2B's TypeScript kernel do), then runs like a JavaScript cell in
// the same global scope. Imports are kept even when only their types seem
// used (preserveValueImports), and a syntax error is the cell's SyntaxError.
const TYPESCRIPT = process.argv.includes('--typescript');
let typescript = null;
function transpile(code) {
  if (!TYPESCRIPT) return code;
  if (typescript === null) {
    // Debian's node-typescript, where Debian puts node modules (a node from
    // elsewhere does not search there).
    const load = Module.createRequire(KERNEL_FILE);
    try {
      typescript = load('/usr/share/nodejs/typescript');
    } catch {
      typescript = load('typescript');
    }
  }
  const out = typescript.transpileModule(code, {
    reportDiagnostics: true,
    compilerOptions: {
      target: typescript.ScriptTarget.ES2022, module: typescript.ModuleKind.ESNext,
      isolatedModules: true, preserveValueImports: true, sourceMap: false, removeComments: false,
    },
  });
  const problem = (out.diagnostics || []).find((d) => d.category === typescript.DiagnosticCategory.Error);
  if (problem) {
    const text = typescript.flattenDiagnosticMessageText(problem.messageText, '\n');
    let where = '';
    if (problem.file && problem.start !== undefined) {
      const { line, character } = problem.file.getLineAndCharacterOfPosition(problem.start);
      where = ` (${line + 1}:${character + 1})`;
    }
    throw new SyntaxError(`${text}${where}`);
  }
  // The module marker and `export {}` it may add would make V8 refuse the script.
  return out.outputText.replace(/^export \{\};?\s*$/m, '');
}

function startCell({ id, code, env }) {
  const count = ++executionCount;
  const cell = { id, count, settled: false, code, frames: [], saved: null };
  if (env) {
    // Set for this cell; finish() puts back what was there.
    cell.saved = env.map(([k]) => [k, Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined]);
    for (const [k, v] of env) process.env[k] = v;
  }
  current = cell;
  try {
    code = transpile(code);
  } catch (err) {
    finishWithError(cell, err, null);
    return;
  }
  const expression = `${maybeObjectLiteral(rewriteImports(code))}\n//# sourceURL=<cell-${count}>`;
  pendingEvaluate = () => session.post('Runtime.evaluate', {
    expression, replMode: true, silent: true, objectGroup: 'warden',
  }, (err, res) => onEvaluated(cell, err, res));
  try {
    hideSigintListeners = true;
    runner.runInThisContext({ breakOnSigint: true, displayErrors: false });
  } catch (err) {
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      interrupt(cell);
    } else {
      finishWithError(cell, err, null);
    }
  } finally {
    hideSigintListeners = false;
    reinstallSigintListeners();
  }
}

// The SIGINT dance around the runner. vm's breakOnSigint starts a watchdog
// (a thread and its own SIGINT handler) for the call. When the process has
// SIGINT listeners, vm takes them all off for the call and puts them back
// after; taking the last one off makes libuv reset SIGINT to SIG_DFL until
// the watchdog installs its handler (after creating its thread): a SIGINT in
// that gap would kill the kernel. vm decides by asking
// process.listenerCount('SIGINT'), and for that one question it hears 0, so
// libuv's handler stays in place until the watchdog's replaces it. When the
// watchdog stops it installs node's default handler (which exits), so right
// after the call all SIGINT listeners are removed and re-added, which makes
// libuv install its handler again. What remains is that short gap after the
// watchdog stops (microseconds), once per cell.
let hideSigintListeners = false;
const EventEmitterListenerCount = process.listenerCount;
Object.defineProperty(process, 'listenerCount', {
  value: function listenerCount(name, ...rest) {
    if (hideSigintListeners && name === 'SIGINT') return 0;
    return ReflectApply(EventEmitterListenerCount, this, [name, ...rest]);
  },
  writable: true, configurable: true, enumerable: false,
});

function reinstallSigintListeners() {
  const listeners = process.rawListeners('SIGINT');
  process.removeAllListeners('SIGINT');
  for (const listener of listeners) process.addListener('SIGINT', listener);
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
    // The inspector holds objects it handed out (not primitives) until released.
    if (res.result.objectId !== undefined) {
      postSync('Runtime.releaseObjectGroup', { objectGroup: 'warden' });
    }
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
  if (cell.saved) {
    for (const [k, v] of cell.saved) {
      if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
    cell.saved = null;
  }
  cell.frames.push(frame({ type: 'done', id: cell.id, execution_count: cell.count, status }));
  const out = cell.frames.length === 1 ? cell.frames[0] : BufferConcat(cell.frames);
  afterOutputFlushed(() => {
    channel.write(out);
    if (current === cell) current = null;
    // The next queued cell starts from a fresh macrotask, not inside this
    // cell's promise reactions.
    if (queue.length) setImmediate(runNext);
  });
}

// node writes to a pipe synchronously only while the pipe has room; the
// rest is queued and written as the reader drains it. The protocol wants all
// of a cell's output in the pipes before its done frame, so wait for those
// queues (an empty write calls back once everything before it is written).
const stdioStreams = [process.stdout, process.stderr];
function afterOutputFlushed(callback) {
  let waiting = 1;
  const one = () => { if (--waiting === 0) callback(); };
  for (const stream of stdioStreams) {
    try {
      if (stream.writableLength > 0 && !stream.destroyed) {
        waiting++;
        stream.write('', one);
      }
    } catch {
      // A stream the cell broke: nothing more to wait for.
    }
  }
  one();
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
  if (err instanceof ExitRequest) {
    if (err.code === 0) {
      finish(cell, 'ok');
      return;
    }
    cell.frames.push(frame({
      type: 'error', id: cell.id, ename: 'ProcessExit', evalue: `process.exit(${err.code})`,
      traceback: [`ProcessExit: process.exit(${err.code}) ended the cell`],
    }));
    finish(cell, 'error');
    return;
  }
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
  if (err instanceof ExitRequest) {
    stderrWrite(`process.exit(${err.code}) called from a callback: ignored, the kernel keeps running\n`);
    return;
  }
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

// process.exit() in a cell ends the cell, not the kernel (status ok for 0,
// else error ProcessExit); from a callback it is reported and ignored. The
// kernel itself ends with realExit.
const realExit = process.exit;
class ExitRequest {
  constructor(code) { this.code = code; }
}
process.exit = function exit(code) {
  let c = code === undefined ? process.exitCode : code;
  c = c === undefined || c === null ? 0 : Number(c) | 0;
  throw new ExitRequest(c);
};

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

send({ type: 'ready', language: TYPESCRIPT ? 'typescript' : 'javascript', version: process.versions.node });
