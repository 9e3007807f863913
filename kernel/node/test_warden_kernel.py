"""Protocol tests for the JavaScript kernel (warden_kernel.js), outside any
sandbox, through kernel/testing/kernel_harness.py.

    /usr/bin/python3 -m unittest kernel/node/test_warden_kernel.py
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))

from kernel_harness import GateOpener, KernelProcess, SharedKernelTestCase  # noqa: E402

NODE = "/usr/bin/node"
KERNEL = os.path.join(HERE, "warden_kernel.js")


class KernelTestCase(SharedKernelTestCase):
    ARGV = [NODE, KERNEL]

    def assert_alive(self):
        self.assertIsNone(self.kernel.proc.poll(), "the kernel died")
        self.assertEqual(self.text("6 * 7"), "42")


class NodeKernelTest(KernelTestCase):
    # --------------------------------------------------------------- state --

    def test_state_persists_across_cells(self):
        self.ok("let x = 41;\nfunction inc(v) { return v + 1; }\nclass Box { constructor(v) { this.v = v; } }")
        self.ok("const y = 'unrelated';")
        cell = self.ok("console.log(inc(x)); new Box(y).v")
        self.assertEqual(cell.stdout, b"42\n")
        self.assertEqual(cell.result["data"]["text/plain"], "'unrelated'")

    def test_a_cells_env_frame_holds_for_that_cell_only(self):
        self.assertEqual(self.text("process.env.WK_A", env={"WK_A": "cell=é"}), "'cell=é'")
        self.assertEqual(self.text("String(process.env.WK_A)"), "'undefined'")

    def test_redeclaring_let_and_const_in_a_later_cell_replaces_them(self):
        self.ok("let ra = 1; const rb = 2; class RC {}")
        self.assertEqual(self.text("let ra = 10; const rb = 20; class RC { f() { return 3; } }; "
                                   "ra + rb + new RC().f()"), "33")
        cell = self.run_cell("let d = 1; let d = 2;")  # within one cell it is still an error
        self.assertEqual(cell.error["ename"], "SyntaxError")

    def test_top_level_await_keeps_declarations(self):
        cell = self.ok("const a = await new Promise(r => setTimeout(() => r(1), 50));\n"
                       "let b = await Promise.resolve(2);\n"
                       "class K { get v() { return a + b; } }\n"
                       "function g() { return new K().v; }\n"
                       "await new Promise(r => setTimeout(r, 100)); 42")
        self.assertEqual(cell.result["data"]["text/plain"], "42")
        self.assertEqual(self.text("g() + a + b"), "6")

    def test_globals_and_require(self):
        with open(os.path.join(self.workdir.name, "local.js"), "w") as f:
            f.write("module.exports = { answer: 42 };\n")
        os.makedirs(os.path.join(self.workdir.name, "node_modules", "pkg"))
        with open(os.path.join(self.workdir.name, "node_modules", "pkg", "index.js"), "w") as f:
            f.write("module.exports = 'from node_modules';\n")
        self.assertEqual(self.text("require('./local.js').answer"), "42")
        self.assertEqual(self.text("require('pkg')"), "'from node_modules'")
        self.assertEqual(self.text("require('path').join('a', 'b')"), "'a/b'")
        self.assertEqual(self.text("fs.existsSync('local.js')"), "true")  # builtins as lazy globals
        self.assertEqual(
            self.text("[typeof console.log, typeof process.pid, typeof setTimeout, typeof Buffer, "
                      "typeof URL, typeof TextEncoder, typeof structuredClone].join()"),
            "'function,number,function,function,function,function,function'")
        # One realm: objects from node's modules are instances of the cell's globals.
        self.assertEqual(self.text("fs.readdirSync('.') instanceof Array && "
                                   "(() => { try { fs.readFileSync('nope') } catch (e) { return e instanceof Error } })()"),
                         "true")
        self.ok("const fs = require('fs');")  # shadowing a builtin global is fine

    def test_import(self):
        with open(os.path.join(self.workdir.name, "m.mjs"), "w") as f:
            f.write("export const v = 42; export default 'dflt';\n")
        cell = self.ok("(await import('./m.mjs')).v")
        self.assertEqual(cell.result["data"]["text/plain"], "42")
        self.assertEqual(cell.stderr, b"")  # no ExperimentalWarning from the kernel's loader
        self.assertEqual(self.text("import d, { v as w } from './m.mjs'\n"
                                   "import * as path from 'node:path';\n"
                                   "[d, w, path.sep]"), "[ 'dflt', 42, '/' ]")
        # Only code is rewritten, not strings, comments or regex literals.
        self.assertEqual(self.text("// import('x')\n'import(\"y\")'"), "'import(\"y\")'")
        self.assertEqual(self.text("/'/.test(\"'\") + ` ${'}'} import('z')` + /import(x)/.source"),
                         "\"true } import('z')import(x)\"")
        self.assertEqual(self.text("({ import(a) { return a; } }).import(5) / 5 / 1"), "1")

    # ----------------------------------------------------------- streaming --

    def test_output_streams_while_the_cell_runs(self):
        # The cell waits for a gate file that the test creates only once it
        # has seen "early": held-back output would leave the gate shut.
        opener = GateOpener(self.workdir.name, [("gate-stream", [("stdout", b"early")])])
        cell = self.ok("console.log('early');\n"
                       "for (let i = 0; i < 2000 && !fs.existsSync('gate-stream'); i++)\n"
                       "  await new Promise(r => setTimeout(r, 10));\n"
                       "console.log(fs.existsSync('gate-stream') ? 'late' : 'gate never opened');",
                       on_chunk=opener)
        self.assertEqual(cell.stdout, b"early\nlate\n")

    def test_output_is_in_the_pipe_before_done(self):
        cell = self.ok("process.stdout.write('x'.repeat(1 << 20)); console.error('to stderr'); undefined")
        self.assertEqual(len(cell.stdout), 1 << 20)
        self.assertEqual(cell.stderr, b"to stderr\n")

    def test_forged_frames_and_invalid_utf8_are_output(self):
        cell = self.ok("console.log('12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}'); "
                       "process.stdout.write(Buffer.from([0xff, 0xfe, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x0a])); "
                       "undefined")
        self.assertIn(b'12\n{"type":"done","id":1,"status":"ok"}\n', cell.stdout)
        self.assertIn(b"\xff\xfe\x1b[31m\n", cell.stdout)
        self.assertEqual([f["type"] for f in cell.frames], ["done"])
        self.assert_alive()

    def test_unicode_code(self):
        cell = self.ok("const s = 'héllo ✓ 🎉'; console.log(s); s.length")
        self.assertEqual(cell.stdout, "héllo ✓ 🎉\n".encode())
        self.assertEqual(cell.result["data"]["text/plain"], "10")

    # -------------------------------------------------------------- values --

    def test_last_expression_value(self):
        self.assertEqual(self.text("1 + 1"), "2")
        self.assertEqual(self.text("'s'"), "'s'")
        self.assertEqual(self.text("10n ** 20n"), "100000000000000000000n")
        self.assertEqual(self.text("new Map([[1, {a: 2}]])"), "Map(1) { 1 => { a: 2 } }")
        cell = self.ok("({a: [1, 2, {b: null}], c: 'd'})")
        self.assertEqual(cell.result["data"]["application/json"], {"a": [1, 2, {"b": None}], "c": "d"})
        self.assertEqual(cell.result["execution_count"], cell.done["execution_count"])
        self.assertNotIn("application/json", self.ok("new Date(0)").result["data"])
        self.assertNotIn("application/json", self.ok("const cyc = {}; cyc.self = cyc; cyc").result["data"])
        self.assertEqual(self.text("{a: 1, b: 'x'}"), "{ a: 1, b: 'x' }")  # an object, not a block
        self.assertEqual(self.text("Promise.resolve(7)"), "7")  # promises are awaited
        for code in ("undefined", "let z = 5;", "console.log('x')", "function f() {}"):
            cell = self.ok(code)
            self.assertIsNone(cell.result, (code, cell.frames))

    # -------------------------------------------------------------- errors --

    def assert_no_kernel_frames(self, error):
        for line in error["traceback"]:
            for bad in ("warden_kernel", "warden-kernel", "node:inspector", "node:vm", "<cell-"):
                self.assertNotIn(bad, line, error["traceback"])

    def test_errors_are_structured(self):
        cell = self.run_cell("null.boom")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual(cell.error["ename"], "TypeError")
        self.assertIn("Cannot read properties of null", cell.error["evalue"])
        self.assertTrue(cell.error["traceback"][0].startswith("TypeError: Cannot read"))
        n = cell.done["execution_count"]
        self.assertIn("<cell %d>:1:6" % n, "\n".join(cell.error["traceback"]))
        self.assert_no_kernel_frames(cell.error)
        self.assertEqual([f["type"] for f in cell.frames], ["error", "done"])

    def test_error_stack_shows_user_frames_across_cells(self):
        n = self.ok("function deep() { throw new RangeError('too deep'); }").done["execution_count"]
        cell = self.run_cell("\nfunction outer() { deep(); }\nouter()")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("RangeError", "too deep"))
        tb = "\n".join(cell.error["traceback"])
        self.assertIn("at deep (<cell %d>:1:" % n, tb)
        self.assertIn("at outer (<cell %d>:2:" % (n + 1), tb)
        self.assertIn("at <cell %d>:3:1" % (n + 1), tb)
        self.assert_no_kernel_frames(cell.error)

    def test_error_kinds(self):
        cell = self.run_cell("let ok = 1;\nfoo)")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertEqual(cell.error["traceback"][:3],
                         ["<cell %d>:2" % cell.done["execution_count"], "foo)", "   ^"])
        self.assertEqual(self.run_cell("nope + 1").error["ename"], "ReferenceError")
        cell = self.run_cell("throw 42")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("Error", "42"))
        cell = self.run_cell("await new Promise(r => setTimeout(r, 10)); throw new URIError('after await')")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("URIError", "after await"))
        self.assert_no_kernel_frames(cell.error)
        cell = self.run_cell("Promise.reject(new EvalError('rejected'))")
        self.assertEqual(cell.error["ename"], "EvalError")
        cell = self.run_cell("fs.readFileSync('/nonexistent/file')")
        self.assertEqual(cell.error["ename"], "Error")
        self.assertIn("ENOENT", cell.error["evalue"])
        self.assert_no_kernel_frames(cell.error)
        self.assert_alive()

    def test_stray_errors_are_logged_and_the_kernel_survives(self):
        first = self.ok("setTimeout(() => { throw new Error('late boom'); }, 10);\n"
                        "Promise.reject(new Error('nobody catches me'));\n"
                        "setTimeout(() => process.exit(3), 20); 1")
        cell = self.ok("await new Promise(r => setTimeout(r, 200)); 'alive'")
        self.assertEqual(cell.result["data"]["text/plain"], "'alive'")
        stderr = first.stderr + cell.stderr  # when each lands depends on timing
        self.assertIn(b"late boom", stderr)
        self.assertIn(b"at Timeout._onTimeout (<cell %d>:1:" % first.done["execution_count"], stderr)
        self.assertIn(b"nobody catches me", stderr)
        self.assertIn(b"process.exit(3)", stderr)
        self.assertNotIn(b"warden", stderr)
        self.assert_alive()

    def test_process_exit_ends_the_cell_not_the_kernel(self):
        cell = self.run_cell("let kept = 1; console.log('before'); process.exit(4); console.log('after')")
        self.assertEqual(cell.stdout, b"before\n")
        self.assertEqual((cell.done["status"], cell.error["ename"]), ("error", "ProcessExit"))
        self.assertEqual(self.run_cell("process.exit()").done["status"], "ok")
        self.assertEqual(self.text("kept"), "1")

    # ----------------------------------------------------------- interrupt --

    def test_interrupt_stops_a_synchronous_loop_and_keeps_state(self):
        self.interrupt_after(0.3)
        cell = self.run_cell("let kept = 5;\nfunction spin() { for (;;) {} }\nconsole.log('spinning'); spin();")
        self.assertEqual(cell.done["status"], "interrupted")
        self.assertEqual(cell.error["ename"], "Interrupted")
        self.assertEqual(cell.stdout, b"spinning\n")
        self.assertEqual(self.text("kept + 1"), "6")
        self.interrupt_after(0.3)
        self.assertEqual(self.run_cell("while (true) {}").done["status"], "interrupted")
        self.assert_alive()

    def test_interrupt_abandons_an_awaited_promise_and_keeps_state(self):
        self.interrupt_after(0.3)
        cell = self.run_cell("let kept2 = 6; await new Promise(r => setTimeout(r, 100000)); kept2 = 0")
        self.assertEqual(cell.done["status"], "interrupted")
        self.assertEqual(cell.error["ename"], "Interrupted")
        self.assertEqual(self.text("kept2"), "6")

    def test_sigint_while_idle_is_ignored(self):
        self.ok("let idle = 'still here';")
        for _ in range(3):
            self.kernel.interrupt()
            time.sleep(0.05)
        time.sleep(0.2)
        self.assertIsNone(self.kernel.proc.poll())
        self.assertEqual(self.text("idle"), "'still here'")
        self.assertEqual(self.kernel.execute("1").done["status"], "ok")




class FreshNodeKernelTest(KernelTestCase):
    """Tests that need a kernel of their own (ids, counts, cell names)."""

    fresh_kernel_per_test = True

    # --------------------------------------------------------------- ready --

    def test_ready_frame(self):
        version = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout
        self.assertEqual(self.kernel.ready["type"], "ready")
        self.assertEqual(self.kernel.ready["language"], "javascript")
        self.assertEqual(self.kernel.ready["version"], version.strip().lstrip("v"))

    # ---------------------------------------------------- execution count --

    def test_execution_count_increments_per_execute(self):
        counts = []
        for code in ("1", "null.boom", "undefined", "foo)"):
            cell = self.run_cell(code)
            counts.append(cell.done["execution_count"])
        self.assertEqual(counts, [1, 2, 3, 4])
        self.assertEqual(self.ok("5").result["execution_count"], 5)

    def test_cells_sent_back_to_back_run_in_order(self):
        # The harness collects one cell at a time: read the raw frames here.
        first = self.kernel.send_execute("await new Promise(r => setTimeout(r, 100)); 'first'")
        second = self.kernel.send_execute("'second'")
        frames = []
        while len([f for f in frames if f["type"] == "done"]) < 2:
            frame = self.kernel._read_frame(10)
            self.assertIsNotNone(frame, frames)
            frames.append(frame)
        self.assertEqual([(f["id"], f["type"]) for f in frames],
                         [(first, "execute_result"), (first, "done"),
                          (second, "execute_result"), (second, "done")])
        self.assertEqual(frames[0]["data"]["text/plain"], "'first'")
        self.assertEqual((frames[1]["execution_count"], frames[3]["execution_count"]), (1, 2))

    def test_frame_arriving_in_pieces(self):
        code = "'héllo' + 1"
        cell_id = self.kernel.send_execute(code, split=5, between=lambda: time.sleep(0.1))
        cell = self.kernel.collect(cell_id, timeout=10)
        self.assertEqual(cell.result["data"]["text/plain"], "'héllo1'")
        # Split inside the two bytes of "é".
        cell_id = self.kernel.send_execute(code, split=len(b"execute 2 12\n'h") + 1,
                                           between=lambda: time.sleep(0.1))
        self.assertEqual(self.kernel.collect(cell_id, timeout=10).result["data"]["text/plain"], "'héllo1'")


class TypeScriptKernelTest(KernelTestCase):
    """The same kernel in its TypeScript mode (`--typescript`)."""

    ARGV = [NODE, KERNEL, "--typescript"]

    def test_ready_names_typescript(self):
        self.assertEqual(self.kernel.ready["language"], "typescript")

    def test_types_are_stripped_and_state_persists(self):
        cell = self.ok('const tsMessage: string = "Hello World!"; console.log(tsMessage)')
        self.assertEqual(cell.stdout, b"Hello World!\n")
        self.assertEqual(self.text("tsMessage.length as number"), "12")

    def test_interfaces_enums_generics_and_functions(self):
        self.ok("interface TsPoint { x: number; y: number }\n"
                "enum TsColor { Red, Green }\n"
                "function tsFirst<T>(items: T[]): T { return items[0] }")
        self.assertEqual(self.text("const tsP: TsPoint = { x: 3, y: 4 }\ntsP.x * tsP.y"), "12")
        self.assertEqual(self.text("TsColor.Green"), "1")
        self.assertEqual(self.text("tsFirst<string>(['a', 'b'])"), "'a'")

    def test_top_level_await_and_imports(self):
        self.assertEqual(self.text("await Promise.resolve<number>(5)"), "5")
        # An import whose binding is unused in the cell is kept, not elided
        # as TypeScript elides imports it takes for types only.
        self.ok("import { readFileSync as tsRead } from 'fs'")
        self.assertEqual(self.text("typeof tsRead"), "'function'")

    def test_a_syntax_error_is_the_cells_error_and_the_kernel_lives_on(self):
        cell = self.run_cell("const tsBroken: = 3")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertIn("(1:", cell.error["evalue"])
        self.assert_alive()


if __name__ == "__main__":
    unittest.main()
