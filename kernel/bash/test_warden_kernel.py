"""Protocol tests for the bash kernel (warden_kernel.sh), outside any
sandbox, through kernel/testing/kernel_harness.py.

    /usr/bin/python3 -m unittest kernel/bash/test_warden_kernel.py
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

BASH = "/bin/bash"
KERNEL = os.path.join(HERE, "warden_kernel.sh")
ARGV = [BASH, "--noprofile", "--norc", KERNEL]  # as the supervisor starts it


class KernelTestCase(SharedKernelTestCase):
    ARGV = ARGV

    def run_cell(self, code, timeout=10, **kwargs):
        cell = super().run_cell(code, timeout=timeout, **kwargs)
        # Bash cells never produce results; done always carries exit_code.
        self.assertIsNone(cell.result)
        self.assertIn("exit_code", cell.done)
        return cell

    def ok(self, code, **kwargs):
        cell = self.run_cell(code, **kwargs)
        self.assertEqual((cell.done["status"], cell.done["exit_code"]), ("ok", 0),
                         (code, cell.frames, cell.stdout, cell.stderr))
        return cell

    def out(self, code):
        return self.ok(code).stdout.decode()

    def assert_alive(self):
        self.assertIsNone(self.kernel.proc.poll(), "the kernel died")
        self.assertEqual(self.out("echo alive"), "alive\n")


class BashKernelTest(KernelTestCase):

    # --------------------------------------------------------------- state --

    def test_a_cells_env_frame_holds_for_that_cell_only(self):
        self.ok("export WK_B=before")
        self.assertEqual(self.ok("echo $WK_A $WK_B; bash -c 'echo $WK_A'", env={"WK_A": "cell=é", "WK_B": "x"})
                         .stdout.decode(), "cell=é x\ncell=é\n")
        self.assertEqual(self.out("echo ${WK_A-unset} $WK_B"), "unset before\n")

    def test_state_persists_across_cells(self):
        self.ok("x=41\ninc() { echo $(( $1 + 1 )); }\ndeclare -A table=([k]=v)\narr=(a b c)\n"
                "export EXPORTED=yes\nalias greet='echo hi from alias'\nmkdir -p sub && cd sub")
        self.ok("unrelated=1")
        self.assertEqual(self.out("inc $x; echo ${table[k]} ${#arr[@]}; bash -c 'echo $EXPORTED'; greet; "
                                  "basename \"$PWD\""),
                         "42\nv 3\nyes\nhi from alias\nsub\n")
        self.ok("cd ..")

    def test_declare_makes_globals(self):
        self.ok("declare -i counter=5; declare -a list=(1 2); typeset t=typed")
        self.assertEqual(self.out("counter+=1; echo $counter ${list[1]} $t"), "6 2 typed\n")

    def test_code_with_quotes_heredocs_and_unicode(self):
        code = ("s='it'\"'\"'s \"quoted\" $HOME \\\\ `tick`'\n"
                "cat <<'EOF'\n$s unexpanded\n  indented ✓\nEOF\n"
                "cat <<EOF\nexpanded: $s\nEOF\n"
                "if [[ -n $s ]]; then\n  echo 'multi-line ok'\nfi\n"
                "echo 'héllo wörld ✓ 🎉'")
        self.assertEqual(self.out(code),
                         "$s unexpanded\n  indented ✓\n"
                         "expanded: it's \"quoted\" $HOME \\\\ `tick`\n"
                         "multi-line ok\nhéllo wörld ✓ 🎉\n")
        self.assertEqual(self.out("echo ${#s}"), "%d\n" % len("it's \"quoted\" $HOME \\\\ `tick`"))

    def test_empty_and_comment_cells(self):
        self.ok("")
        self.ok("# only a comment")
        self.ok("\n\n")

    # ----------------------------------------------------------- exit codes --

    def test_exit_codes(self):
        cell = self.run_cell("false")
        self.assertEqual((cell.done["status"], cell.done["exit_code"]), ("error", 1))
        self.assertIsNone(cell.error)  # the shell's own messages are on stderr
        cell = self.run_cell("nosuchcommand_xyz")
        self.assertEqual(cell.done["exit_code"], 127)
        self.assertIn(b"nosuchcommand_xyz: command not found", cell.stderr)
        self.assertEqual(self.run_cell("(exit 5)").done["exit_code"], 5)
        self.assertEqual(self.run_cell("false; true").done["exit_code"], 0)
        self.assertEqual(self.run_cell("ls /nonexistent_dir | cat").done["exit_code"], 0)
        self.assertEqual(self.run_cell("set -o pipefail; ls /nonexistent_dir | cat").done["exit_code"], 2)
        self.ok("set +o pipefail")
        # $? at the start of a cell is the previous cell's status.
        self.run_cell("(exit 9)")
        self.assertEqual(self.out("echo $?"), "9\n")

    def test_exit_ends_the_cell_not_the_kernel(self):
        cell = self.run_cell("kept=yes; echo before; exit 3; echo after")
        self.assertEqual((cell.done["status"], cell.done["exit_code"]), ("error", 3))
        self.assertEqual(cell.stdout, b"before\n")
        self.assertEqual(self.out("echo $? $kept"), "3 yes\n")
        self.assertEqual(self.run_cell("die() { echo dying; exit 4; }; die; echo after").done["exit_code"], 4)
        self.assertEqual(self.run_cell("true; exit").done["status"], "ok")  # exit uses $?
        # In subshells exit is the real builtin.
        self.assertEqual(self.out("(exit 6); echo $?; echo $(exit 7; echo no) $?"), "6\n7\n")
        self.assert_alive()

    def test_errexit_ends_the_cell_not_the_kernel(self):
        cell = self.run_cell("set -e; echo one; false; echo two")
        self.assertEqual((cell.done["status"], cell.done["exit_code"]), ("error", 1))
        self.assertEqual(cell.stdout, b"one\n")
        # still on in the next cell, as in a script; exempt contexts still work
        cell = self.run_cell("if false; then :; fi; false || echo handled; f() { false; echo no; }; f")
        self.assertEqual((cell.done["exit_code"], cell.stdout), (1, b"handled\n"))
        self.ok("set +e")
        self.assert_alive()

    def test_nounset_and_expansion_errors_do_not_end_the_kernel(self):
        cell = self.run_cell("set -u; echo $undefined_var_xyz; echo same-line\necho next-line")
        self.assertIn(b"undefined_var_xyz: unbound variable", cell.stderr)
        self.assertEqual(cell.stdout, b"next-line\n")  # the failing line is abandoned
        self.ok("set +u")
        cell = self.run_cell("echo ${missing_xyz:?is required}")
        self.assertEqual(cell.done["status"], "error")
        self.assertIn(b"missing_xyz: is required", cell.stderr)
        self.assert_alive()

    def test_syntax_error(self):
        cell = self.run_cell("echo first\nif then fi")
        self.assertEqual((cell.done["status"], cell.done["exit_code"]), ("error", 2))
        self.assertIn(b"line 2: syntax error", cell.stderr)
        self.assert_alive()

    def test_break_and_continue_at_top_level(self):
        self.assertEqual(self.run_cell("echo a; break; echo b").stdout, b"a\n")
        self.assertEqual(self.run_cell("echo c; continue; echo d").stdout, b"c\n")
        self.assert_alive()

    # ----------------------------------------------------------- streaming --

    def test_output_streams_while_the_cell_runs(self):
        # The cell waits for a gate file that the test creates only once it
        # has seen "early": held-back output would leave the gate shut.
        opener = GateOpener(self.workdir.name, [("gate-stream", [("stdout", b"early")])])
        cell = self.ok("echo early\n"
                       "for i in $(seq 2000); do [ -e gate-stream ] && break; sleep 0.01; done\n"
                       "if [ -e gate-stream ]; then echo late; else echo gate never opened; fi",
                       on_chunk=opener)
        self.assertEqual(cell.stdout, b"early\nlate\n")

    def test_stdout_and_stderr(self):
        cell = self.ok("echo out; echo err >&2; printf 'no newline'")
        self.assertEqual((cell.stdout, cell.stderr), (b"out\nno newline", b"err\n"))

    def test_forged_frames_invalid_utf8_and_ansi_are_output(self):
        cell = self.ok("printf '12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}\\n'; "
                       "printf '\\xff\\xfe\\x1b[31m\\n'; printf '7\\n{\"a\":1}' >&2")
        self.assertIn(b'12\n{"type":"done","id":1,"status":"ok"}\n', cell.stdout)
        self.assertIn(b"\xff\xfe\x1b[31m\n", cell.stdout)
        self.assertEqual(cell.stderr, b'7\n{"a":1}')
        self.assertEqual([f["type"] for f in cell.frames], ["done"])
        self.assert_alive()

    def test_xtrace_shows_the_cells_commands_only(self):
        self.ok("set -x")
        cell = self.ok("echo traced")
        self.assertIn(b"echo traced", cell.stderr)
        self.assertNotIn(b"warden", cell.stderr)
        cell = self.ok("set +x")
        self.assertNotIn(b"warden", cell.stderr)
        self.assertEqual(self.ok("echo quiet").stderr, b"")

    # ------------------------------------------------------------ channel --

    def test_commands_do_not_inherit_the_channel(self):
        listing = self.out("ls -l /proc/self/fd/")
        self.assertNotIn("socket:", listing)
        # A cell that closes fds 3 and 254 only affects itself.
        self.ok("exec 3>&- 254>&-; echo closed")
        self.assert_alive()

    # ----------------------------------------------------------- interrupt --

    def test_interrupt_stops_the_foreground_command_and_the_rest_of_the_cell(self):
        self.interrupt_after(0.3)
        cell = self.run_cell("kept_i=5; echo started; sleep 100; echo not-reached")
        self.assertEqual(cell.done["status"], "interrupted")
        self.assertEqual(cell.done["exit_code"], 130)
        self.assertEqual(cell.error["ename"], "Interrupted")
        self.assertEqual(cell.stdout, b"started\n")
        self.assertEqual(self.out("echo $kept_i"), "5\n")

    def test_interrupt_stops_loops_functions_and_pipelines(self):
        for code in ("while :; do :; done; echo not-reached",
                     "f() { sleep 100; }; f; echo not-reached",
                     "for i in 1 2 3; do sleep 100; done; echo not-reached",
                     "sleep 100 | cat; echo not-reached",
                     "v=$(sleep 100); echo not-reached"):
            self.interrupt_after(0.3)
            cell = self.run_cell(code)
            self.assertEqual(cell.done["status"], "interrupted", code)
            self.assertNotIn(b"not-reached", cell.stdout, code)
        self.assert_alive()

    def test_sigint_while_idle_is_ignored(self):
        self.ok("idle_var='still here'")
        for _ in range(3):
            self.kernel.interrupt()
            time.sleep(0.05)
        time.sleep(0.2)
        self.assertIsNone(self.kernel.proc.poll())
        self.assertEqual(self.out("echo $idle_var"), "still here\n")


class FreshBashKernelTest(KernelTestCase):
    """Tests that need a kernel of their own (ids, counts)."""

    fresh_kernel_per_test = True

    def test_ready_frame(self):
        version = subprocess.run([BASH, "-c", "echo $BASH_VERSION"], capture_output=True,
                                 text=True).stdout.strip()
        self.assertEqual(self.kernel.ready["type"], "ready")
        self.assertEqual(self.kernel.ready["language"], "bash")
        self.assertEqual(self.kernel.ready["version"], version)

    def test_execution_count_increments_per_execute(self):
        counts = [self.run_cell(code).done["execution_count"]
                  for code in ("true", "false", "exit 2", "if then", ":")]
        self.assertEqual(counts, [1, 2, 3, 4, 5])

    def test_frame_arriving_in_pieces(self):
        code = "echo 'héllo'"
        header = b"execute 1 %d\n" % len(code.encode())
        # Split inside the header, then inside the two bytes of "é".
        for cell_id_split in (5, len(header) + len(b"echo 'h") + 1):
            cell_id = self.kernel.send_execute(code, split=cell_id_split, between=lambda: time.sleep(0.1))
            cell = self.kernel.collect(cell_id, timeout=10)
            self.assertEqual(cell.stdout, "héllo\n".encode())
            self.assertEqual(cell.done["status"], "ok")

    def test_starts_in_its_cwd_with_the_environment(self):
        self.assertEqual(self.out('echo "$PWD"; echo "$SHLVL"; echo "${WARDEN_CHANNEL_FD-unset}"'),
                         "%s\n1\n3\n" % os.path.realpath(self.workdir.name))


if __name__ == "__main__":
    unittest.main()
