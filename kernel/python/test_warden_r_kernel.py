"""Protocol tests for the R kernel (warden_r_kernel.py: R embedded through
rpy2), outside any sandbox, through kernel/testing/kernel_harness.py.

    /usr/bin/python3 -m unittest kernel/python/test_warden_r_kernel.py
"""

import base64
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))

from kernel_harness import SharedKernelTestCase  # noqa: E402

KERNEL = os.path.join(HERE, "warden_r_kernel.py")


class RKernelTest(SharedKernelTestCase):
    ARGV = ["/usr/bin/python3", "-u", "-E", KERNEL]
    CELL_TIMEOUT = 30
    def test_ready_names_r(self):
        self.assertEqual(self.kernel.ready["language"], "r")
        self.assertRegex(self.kernel.ready["version"], r"^\d+\.\d+")

    def test_state_persists_and_the_last_value_is_printed_as_r_prints_it(self):
        self.assertIsNone(self.ok("rX <- 20\nrTwice <- function(a) 2 * a").result)
        self.assertEqual(self.text("rTwice(rX) + 2"), "[1] 42")
        self.assertEqual(self.text('paste("a", "b")'), '[1] "a b"')
        self.assertEqual(self.text('Sys.getenv("PATH") == Sys.getenv("PATH")'), "[1] TRUE")

    def test_a_cells_env_frame_holds_for_that_cell_only(self):
        self.assertEqual(self.text('Sys.getenv("WK_A")', env={"WK_A": "cell"}), '[1] "cell"')
        self.assertEqual(self.text('Sys.getenv("WK_A", "unset")'), '[1] "unset"')

    def test_earlier_visible_values_and_console_output_go_to_stdout(self):
        cell = self.ok('print(1:3)\ncat("hi\\n")\n7')
        self.assertEqual(cell.stdout, b"[1] 1 2 3\nhi\n")
        self.assertEqual(cell.result["data"]["text/plain"], "[1] 7")
        cell = self.ok('message("to stderr")')
        self.assertEqual(cell.stderr, b"to stderr\n")

    def test_console_output_comes_a_line_at_a_time(self):
        cell = self.ok('print(1:3)\nprint(c(a = 1, b = 2))\ncat("x")\ncat("y\\n")\nmessage("m")\ncat("tail")')
        self.assertEqual(cell.stdout, b"[1] 1 2 3\na b \n1 2 \nxy\ntail")
        out = [data for _, name, data in cell.chunks if name == "stdout"]
        self.assertTrue(all(chunk.endswith(b"\n") for chunk in out[:-1]), out)
        self.assertTrue(out[-1].endswith(b"tail"), out)  # the partial line, at the cell's end

    def test_a_line_is_written_whole_and_the_streams_keep_their_order(self):
        sys.path.insert(0, HERE)
        try:
            import warden_r_kernel
        finally:
            sys.path.remove(HERE)

        class Recorder:
            def __init__(self, name, log):
                self.name, self.log = name, log

            def write(self, text):
                self.log.append((self.name, text))

        log = []
        out = warden_r_kernel.LineStream(Recorder("out", log))
        err = warden_r_kernel.LineStream(Recorder("err", log))
        out.other, err.other = err, out
        for piece in ("[1]", " 1", " 2", "\n[1]", " 3\n", "partial"):  # R's print(), piece by piece
            out.write(piece)
        err.write("Warning\n")
        out.write(" line\n")
        out.write("end")
        out.flush()
        self.assertEqual(log, [("out", "[1] 1 2\n"), ("out", "[1] 3\n"), ("out", "partial"),
                               ("err", "Warning\n"), ("out", " line\n"), ("out", "end")])

    def test_an_error_ends_the_cell(self):
        cell = self.run_cell('rBefore <- 1\nstop("boom")\nrAfter <- 1')
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("simpleError", "boom"))
        self.assertEqual(cell.error["traceback"], ["Error: boom"])
        self.assertEqual(self.text('exists("rBefore")'), "[1] TRUE")
        self.assertEqual(self.text('exists("rAfter")'), "[1] FALSE")

    def test_a_syntax_error_runs_nothing(self):
        cell = self.run_cell("rNever <- 1\nrNever <- ")
        self.assertEqual(cell.done["status"], "error")
        self.assertIn("unexpected end of input", cell.error["evalue"])
        self.assertEqual(self.text('exists("rNever")'), "[1] FALSE")

    def test_warnings_are_printed_when_they_happen(self):
        cell = self.ok("log(-1)")
        self.assertEqual(cell.result["data"]["text/plain"], "[1] NaN")
        self.assertIn(b"NaNs produced", cell.stderr)

    def test_a_plot_is_a_png(self):
        cell = self.ok("plot(1:10)")
        self.assertEqual(len(cell.displays), 1)
        png = base64.b64decode(cell.displays[0]["data"]["image/png"])
        self.assertEqual(png[1:4], b"PNG")

    def test_interrupt_stops_a_loop_and_a_sleep_and_keeps_the_state(self):
        self.ok("rKept <- 7")
        for code in ("while (TRUE) { }", "Sys.sleep(30)"):
            self.interrupt_after(1.0)
            cell = self.run_cell(code)
            self.assertEqual(cell.done["status"], "interrupted", code)
            self.assertEqual(cell.error["ename"], "Interrupted")
        self.assertEqual(self.text("rKept"), "[1] 7")


if __name__ == "__main__":
    unittest.main()
