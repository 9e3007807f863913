"""Protocol tests for the Java kernel (WardenKernel.java, JShell), outside
any sandbox, through kernel/testing/kernel_harness.py. The kernel is started
the way the supervisor starts it (kernel/language.cc): its channel is also
its fd 0.

    /usr/bin/python3 -m unittest kernel/java/test_warden_kernel.py
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))

from kernel_harness import SharedKernelTestCase  # noqa: E402

KERNEL = os.path.join(HERE, "WardenKernel.java")


class JavaKernelTest(SharedKernelTestCase):
    ARGV = ["/bin/sh", "-c", "exec /usr/bin/java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
            "-XX:-UsePerfData %s 0<&3" % KERNEL]
    CELL_TIMEOUT = 60  # JShell compiles each snippet
    def test_ready_names_java(self):
        self.assertEqual(self.kernel.ready["language"], "java")

    def test_a_cells_env_frame_is_system_properties_for_that_cell_only(self):
        self.assertEqual(self.text('System.getProperty("WK_A")', env={"WK_A": "cell=é"}), '"cell=é"')
        self.assertEqual(self.text('System.getProperty("WK_A", "unset")'), '"unset"')
        path = self.text('System.getProperty("PATH")')
        self.assertEqual(self.text('System.getProperty("PATH")', env={"PATH": "x"}), '"x"')
        self.assertEqual(self.text('System.getProperty("PATH")'), path)

    def test_declarations_persist_and_show_nothing(self):
        cell = self.ok("int javaX = 20;\nint javaTwice(int a) { return 2 * a; }")
        self.assertIsNone(cell.result)
        self.assertEqual(self.text("javaTwice(javaX) + 2"), "42")

    def test_the_last_expression_is_the_result(self):
        self.assertEqual(self.text('String javaS = "abc";\njavaS.length()'), "3")
        self.assertEqual(self.text('"abc" + "def"'), '"abcdef"')
        self.assertEqual(self.text("import java.util.*;\nList<Integer> javaL = new ArrayList<>(List.of(3, 1, 2));\n"
                                   "Collections.sort(javaL);\njavaL"), "[1, 2, 3]")

    def test_output_is_on_stdout_before_done(self):
        cell = self.ok('System.out.println("out");\nSystem.err.println("err");')
        self.assertEqual(cell.stdout, b"out\n")
        self.assertEqual(cell.stderr, b"err\n")
        self.assertIsNone(cell.result)

    def test_output_comes_a_line_at_a_time(self):
        # print() and println() write the text and the newline apart, and
        # JShell flushes after every snippet; the line goes out whole, also
        # when its pieces come 30 ms apart (a partial line waits 100 ms).
        cell = self.ok('{ System.out.print("a"); long t0 = System.nanoTime();\n'
                       '  while (System.nanoTime() - t0 < 30_000_000L) { }\n'
                       '  System.out.println("b"); }\n'
                       'System.out.println("Hello, World!");\nSystem.err.println("e");\nSystem.out.print("tail");')
        out = [data for _, name, data in cell.chunks if name == "stdout"]
        self.assertEqual(out[0], b"ab\n", out)
        self.assertEqual(b"".join(out), b"ab\nHello, World!\ntail")
        self.assertTrue(all(chunk.endswith(b"\n") for chunk in out[:-1]), out)
        self.assertEqual(cell.stderr, b"e\n")

    def test_an_exception_is_the_cells_error(self):
        cell = self.run_cell("int javaZero = 0;\n1 / javaZero")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("ArithmeticException", "/ by zero"))
        self.assertEqual(cell.error["traceback"][0], "java.lang.ArithmeticException: / by zero")
        self.assertFalse(any("WardenKernel" in line for line in cell.error["traceback"]))

    def test_a_compilation_error_names_the_problem(self):
        cell = self.run_cell("int javaY = ;")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual(cell.error["ename"], "CompilationError")
        self.assertIn("illegal start of expression", cell.error["evalue"])
        cell = self.run_cell("javaUndefined + 1")
        self.assertEqual(cell.error["ename"], "CompilationError")
        self.assertIn("cannot find symbol", cell.error["evalue"])

    def test_environment_variables_are_system_properties(self):
        self.assertNotEqual(self.text('System.getenv("PATH")'), "null")
        self.assertEqual(self.text('System.getProperty("PATH").equals(System.getenv("PATH"))'), "true")

    def test_interrupt_stops_a_loop_and_keeps_the_state(self):
        self.ok("int javaKept = 7;")
        self.interrupt_after(1.0)
        cell = self.run_cell("while (true) { }")
        self.assertEqual(cell.done["status"], "interrupted")
        self.assertEqual(cell.error["ename"], "Interrupted")
        self.assertEqual(self.text("javaKept"), "7")

    def test_snapshot_is_refused_and_the_kernel_lives_on(self):
        reply = self.kernel.request("snapshot", {"archive": "/tmp/x"})
        self.assertEqual(reply["type"], "snapshot")
        self.assertIn("cannot snapshot", reply["error"])
        self.assertEqual(self.text("1 + 1"), "2")


if __name__ == "__main__":
    unittest.main()
