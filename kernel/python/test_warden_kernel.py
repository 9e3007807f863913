"""Protocol tests for the Python kernel (kernel/python/warden_kernel.py).

Each test starts the kernel outside any sandbox through the shared harness
(kernel/testing/kernel_harness.py) and checks what docs/kernel-protocol.md
promises. Run from the repository root:

    /usr/bin/python3 -m unittest kernel/python/test_warden_kernel.py
"""

import base64
import io
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testing"))

from kernel_harness import GateOpener, KernelProcess  # noqa: E402

KERNEL = os.path.join(HERE, "warden_kernel.py")
# The sandbox's interpreter (Debian's, with numpy, pandas and matplotlib),
# not whichever python runs the tests.
PYTHON = os.environ.get("WARDEN_TEST_PYTHON", "/usr/bin/python3")


class KernelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One matplotlib cache for all kernels: building it per test is slow.
        cls.mpl_dir = tempfile.mkdtemp(prefix="warden-mpl-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.mpl_dir, ignore_errors=True)

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="warden-kernel-test-")
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)

    def start(self, warm=""):
        env = {"MPLCONFIGDIR": self.mpl_dir}
        if warm:
            env["WARDEN_WARM"] = warm
        kernel = KernelProcess([PYTHON, KERNEL], env=env, cwd=self.workdir)
        self.addCleanup(kernel.close)
        return kernel

    def plain(self, cell):
        """text/plain of the cell's result, after checking it succeeded."""
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        self.assertIsNotNone(cell.result, cell.frames)
        return cell.result["data"]["text/plain"]

    def assertClean(self, error, *cells):
        """A traceback of user frames only, naming the given cells."""
        lines = error["traceback"]
        self.assertIsInstance(lines, list)
        self.assertTrue(all(isinstance(l, str) and "\n" not in l for l in lines), lines)
        text = "\n".join(lines)
        self.assertNotIn("warden_kernel", text)
        for n in cells:
            self.assertIn('File "<cell %d>"' % n, text)


class StartupTest(KernelTest):
    def test_ready_frame_and_warm_imports(self):
        k = self.start(warm="numpy, nosuchmod_warden ,,email.mime.text")
        self.assertEqual(k.ready["language"], "python")
        self.assertRegex(k.ready["version"], r"^3\.\d+\.\d+$")
        self.assertEqual(k.ready["warm"], ["numpy", "email.mime.text"])
        self.assertEqual(list(k.ready["warm_errors"]), ["nosuchmod_warden"])
        self.assertTrue(k.ready["warm_errors"]["nosuchmod_warden"].startswith("ModuleNotFoundError: "))
        # Warm modules are loaded but not imported into the user namespace.
        cell = k.execute("import sys\n('numpy' in sys.modules, 'email.mime.text' in sys.modules, "
                         "'numpy' in globals(), 'email' in globals())")
        self.assertEqual(self.plain(cell), "(True, True, False, False)")

    def test_warm_modules_are_exercised_before_ready(self):
        # A first DataFrame's lazy imports (pandas' string formatter) are done
        # before ready, not in the user's first cell; the namespace stays clean.
        k = self.start(warm="pandas")
        cell = k.execute("import sys\n('pandas.io.formats.string' in sys.modules, sorted(globals()))")
        self.assertEqual(self.plain(cell), repr((True, sorted(
            ["__builtins__", "__doc__", "__loader__", "__name__", "__package__", "__spec__", "sys"]))))

    def test_ready_without_warm(self):
        k = self.start()
        self.assertEqual(k.ready["warm"], [])
        self.assertEqual(k.ready["warm_errors"], {})

    def test_clean_namespace(self):
        k = self.start()
        cell = k.execute("sorted(globals())")
        self.assertEqual(self.plain(cell), repr(sorted(
            ["__builtins__", "__doc__", "__loader__", "__name__", "__package__", "__spec__"])))
        cell = k.execute("import builtins, sys\n(__name__, __builtins__ is builtins, "
                         "sys.modules['__main__'].__dict__ is globals(), callable(display), "
                         "'matplotlib' in sys.modules, 'asyncio' in sys.modules)")
        # matplotlib and asyncio stay unloaded until the user needs them.
        self.assertEqual(self.plain(cell), "('__main__', True, True, True, False, False)")


class StateTest(KernelTest):
    def test_state_persists_across_cells(self):
        k = self.start()
        cell = k.execute("x = 41\n"
                         "def inc(a):\n    return a + 1\n"
                         "class K:\n    v = 3\n"
                         "import json as j\n"
                         "fh = open('state.txt', 'w+')\n")
        self.assertEqual(cell.done["status"], "ok")
        self.assertIsNone(cell.result)
        k.execute("unrelated = 0")
        cell = k.execute("fh.write('hi'); fh.seek(0)\n(inc(x), K.v, j.dumps([1]), fh.read())")
        self.assertEqual(self.plain(cell), "(42, 3, '[1]', 'hi')")

    def test_a_cells_env_frame_holds_for_that_cell_only(self):
        k = self.start()
        code = "import os, subprocess\n(os.environ.get('WK_A', 'unset'), subprocess.run(['sh', '-c', 'echo $WK_A'], capture_output=True, text=True).stdout)"
        self.assertEqual(self.plain(k.execute(code, env={"WK_A": "cell=é"})), "('cell=é', 'cell=é\\n')")
        self.assertEqual(self.plain(k.execute(code)), "('unset', '\\n')")
        self.assertEqual(self.plain(k.execute("os.environ['PATH'] != 'x'", env={"PATH": "x"})), "False")
        self.assertNotEqual(self.plain(k.execute("os.environ['PATH']")), "'x'")

    def test_cell_functions_pickle_and_have_source(self):
        # The namespace is the __main__ module: pickle finds cell classes and
        # inspect finds cell source.
        k = self.start()
        k.execute("class P:\n    def __init__(self): self.v = 5\ndef g():\n    return 1\n")
        cell = k.execute("import pickle, inspect\n(pickle.loads(pickle.dumps(P())).v, inspect.getsource(g))")
        self.assertEqual(self.plain(cell), "(5, 'def g():\\n    return 1\\n')")

    def test_imports_from_the_working_directory(self):
        k = self.start()
        with open(os.path.join(self.workdir, "helper_mod.py"), "w") as f:
            f.write("VALUE = 17\n")
        self.assertEqual(self.plain(k.execute("import helper_mod\nhelper_mod.VALUE")), "17")

    def test_top_level_await(self):
        k = self.start()
        cell = k.execute("import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 6\n"
                         "v = await f()\nv * 7")
        self.assertEqual(self.plain(cell), "42")
        # The kernel's event loop stays out of tracebacks.
        cell = k.execute("async def g():\n    await asyncio.sleep(0)\n    raise KeyError('g')\nawait g()")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("KeyError", "'g'"))
        self.assertClean(cell.error, 2)
        self.assertNotIn("asyncio", "\n".join(cell.error["traceback"]))
        self.assertEqual(self.plain(k.execute("asyncio.run(f())")), "6")


class StreamingTest(KernelTest):
    def test_print_writes_its_line_in_one_piece(self):
        k = self.start()
        for code, stream, text in [('print("hello")', "stdout", b"hello\n"),
                                   ('print(1, 2, sep="-", end="!\\n")', "stdout", b"1-2!\n"),
                                   ('import sys; print("e", file=sys.stderr)', "stderr", b"e\n")]:
            cell = k.execute(code)
            self.assertEqual([(name, data) for _, name, data in cell.chunks], [(stream, text)], code)
        # Other files, and bad arguments, are print's own business.
        cell = k.execute("import io; b = io.StringIO(); print('x', 'y', file=b); b.getvalue()")
        self.assertEqual(self.plain(cell), "'x y\\n'")
        self.assertEqual(k.execute("print('x', sep=3)").error["ename"], "TypeError")

    # A cell that waits for a gate file; the test opens the gate only once it
    # has seen the output printed before the wait (see GateOpener).
    WAIT_FOR_GATE = ("import os, sys, time\n"
                     "def wait_for(gate):\n"
                     "    for _ in range(2000):\n"
                     "        if os.path.exists(gate):\n"
                     "            return True\n"
                     "        time.sleep(0.01)\n"
                     "    print('%s never opened' % gate)\n")

    def test_stdout_streams_while_the_cell_runs(self):
        k = self.start()
        opener = GateOpener(self.workdir, [("gate", [("stdout", b"first")])])
        cell = k.execute(self.WAIT_FOR_GATE + "print('first')\nwait_for('gate')\nprint('second')",
                         on_chunk=opener)
        self.assertEqual(cell.stdout, b"first\nsecond\n")

    def test_unflushed_partial_lines_and_stderr_stream(self):
        k = self.start()
        gates = [("gate%d" % i, [("stdout", b"%d" % i), ("stderr", b"e%d" % i)]) for i in range(3)]
        cell = k.execute(self.WAIT_FOR_GATE +
                         "for i in range(3):\n"
                         "    print(i, end='', flush=False)\n"
                         "    sys.stderr.write('e%d' % i)\n"
                         "    wait_for('gate%d' % i)\n",
                         on_chunk=GateOpener(self.workdir, gates))
        self.assertEqual(cell.stdout, b"012")
        self.assertEqual(cell.stderr, b"e0e1e2")

    def test_subprocess_output_and_ordering_before_done(self):
        k = self.start()
        cell = k.execute("import os, subprocess\n"
                         "print('py', flush=False)\n"
                         "subprocess.run(['echo', 'sub'])\n"
                         "os.system('echo err >&2')\n"
                         "print('end', end='')")
        self.assertEqual(cell.stdout, b"py\nsub\nend")
        self.assertEqual(cell.stderr, b"err\n")

    def test_huge_output(self):
        k = self.start()
        cell = k.execute("print('x' * (4 << 20))\nfor i in range(5000): print(i)")
        self.assertEqual(cell.done["status"], "ok")
        expected = b"x" * (4 << 20) + b"\n" + b"".join(b"%d\n" % i for i in range(5000))
        self.assertEqual(len(cell.stdout), len(expected))
        self.assertEqual(cell.stdout, expected)


class ResultTest(KernelTest):
    def test_trailing_expression_values(self):
        k = self.start()
        cases = [
            ("1 + 1", "2"),
            ("y = 5\ny * 2", "10"),
            ("'s'", "'s'"),
            ("[1, None]", "[1, None]"),
            ("_", "[1, None]"),            # the last result, as in Jupyter
        ]
        for n, (code, expected) in enumerate(cases, 1):
            cell = k.execute(code)
            self.assertEqual(self.plain(cell), expected, code)
            self.assertEqual(cell.result["execution_count"], n)
            self.assertEqual([f["type"] for f in cell.frames], ["execute_result", "done"])
        for code in ["None", "print('p')", "3;", "if True:\n    7", "z = 3", "  # only a comment", ""]:
            cell = k.execute(code)
            self.assertEqual(cell.done["status"], "ok", (code, cell.frames))
            self.assertIsNone(cell.result, code)

    def test_dataframe_has_html(self):
        k = self.start()
        cell = k.execute("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})")
        data = cell.result["data"]
        self.assertIn("a  b", data["text/plain"])
        self.assertIn("<table", data["text/html"])

    def test_dataframe_carries_its_columns_as_data(self):
        k = self.start()
        cell = k.execute("import pandas as pd, numpy as np\n"
                         "pd.DataFrame({'a': [1, 2, 3], 'f': [0.5, np.nan, 2.0], 's': ['x', None, 'z'],\n"
                         "              't': pd.to_datetime(['2020-01-01', None, '2021-06-30 12:00'])})")
        data = cell.result["data"]["application/vnd.warden.dataframe+json"]
        self.assertEqual(data, {"a": [1, 2, 3], "f": [0.5, None, 2.0], "s": ["x", None, "z"],
                                "t": ["2020-01-01T00:00:00", None, "2021-06-30T12:00:00"]})
        # A Series is no DataFrame: no data form.
        self.assertNotIn("application/vnd.warden.dataframe+json", k.execute("pd.Series([1])").result["data"])

    def test_an_indented_cell_runs_dedented_with_its_own_line_numbers(self):
        k = self.start()
        cell = k.execute("\n    ind = 2\n    if ind:\n        ind += 1\n    ind * 10\n")
        self.assertEqual(self.plain(cell), "30")
        cell = k.execute("    x_ind = 1\n    1 / 0\n")
        self.assertEqual(cell.error["ename"], "ZeroDivisionError")
        self.assertIn("line 2", "\n".join(cell.error["traceback"]))
        # Inconsistent indentation is still an error, on its line.
        cell = k.execute("    a_ind = 1\n  b_ind = 2\n")
        self.assertEqual(cell.error["ename"], "IndentationError")

    def test_repr_methods_make_a_mime_bundle(self):
        k = self.start()
        k.execute("class R:\n"
                  "    def __repr__(self): return 'R()'\n"
                  "    def _repr_html_(self): return '<b>r</b>'\n"
                  "    def _repr_markdown_(self): return '**r**'\n"
                  "    def _repr_png_(self): return b'\\x89PNGfake'\n"
                  "    def _repr_json_(self): return {'r': 1}\n"
                  "    def _repr_latex_(self): return None\n"
                  "class M:\n"
                  "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                  "        return {'text/plain': 'M!', 'image/svg+xml': '<svg/>'}\n")
        data = k.execute("R()").result["data"]
        self.assertEqual(data, {"text/plain": "R()", "text/html": "<b>r</b>", "text/markdown": "**r**",
                                "image/png": base64.b64encode(b"\x89PNGfake").decode(),
                                "application/json": {"r": 1}})
        self.assertEqual(k.execute("M()").result["data"], {"text/plain": "M!", "image/svg+xml": "<svg/>"})
        # A class is shown by repr: its _repr_html_ is an unbound function.
        self.assertEqual(k.execute("R").result["data"], {"text/plain": "<class '__main__.R'>"})

    def test_huge_repr_is_cut_to_fit_a_frame(self):
        k = self.start()
        text = self.plain(k.execute("'y' * (9 << 20)"))
        self.assertLess(len(text), 9 << 20)
        self.assertTrue(text.startswith("'yyy"))
        self.assertRegex(text[-60:], r"\[\.\.\. \d+ characters cut by Warden\]$")

    def test_display_builtin(self):
        k = self.start()
        cell = k.execute("class H:\n    def _repr_html_(self): return '<i>h</i>'\n"
                         "display({'a': 1}, H())\nprint('between')\ndisplay('s')")
        self.assertEqual([f["type"] for f in cell.frames], ["display_data"] * 3 + ["done"])
        self.assertEqual(cell.frames[0]["data"], {"text/plain": "{'a': 1}"})
        self.assertEqual(cell.frames[1]["data"]["text/html"], "<i>h</i>")
        self.assertEqual(cell.frames[2]["data"], {"text/plain": "'s'"})
        self.assertEqual(cell.stdout, b"between\n")


class MatplotlibTest(KernelTest):
    def assertPng(self, display):
        self.assertTrue(display["data"]["text/plain"].startswith("<Figure size"), display)
        png = base64.b64decode(display["data"]["image/png"], validate=True)
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        length, kind, width, height = struct.unpack(">I4sII", png[8:24])
        self.assertEqual((length, kind), (13, b"IHDR"))
        self.assertGreater(width, 100)
        self.assertGreater(height, 100)

    def test_open_figure_becomes_png_and_is_closed(self):
        k = self.start()
        cell = k.execute("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')")
        self.assertEqual(cell.done["status"], "ok")
        self.assertEqual(len(cell.displays), 1, cell.frames)
        self.assertPng(cell.displays[0])
        # The title's Text is the result; the figure follows it.
        self.assertEqual([f["type"] for f in cell.frames], ["execute_result", "display_data", "done"])
        self.assertEqual(cell.stderr, b"")
        self.assertEqual(self.plain(k.execute("plt.get_fignums()")), "[]")

    def test_show_displays_each_figure_without_warning(self):
        # pyplot imported by a cell and by a warm import: both get the inline show().
        for warm in ("", "matplotlib.pyplot"):
            with self.subTest(warm=warm):
                self.check_show(self.start(warm=warm))

    def check_show(self, k):
        cell = k.execute("import matplotlib.pyplot as plt\n"
                         "for i in range(2):\n"
                         "    plt.plot([i, 2])\n"
                         "    plt.show()\n"
                         "    print('shown', len(plt.get_fignums()))\n"
                         "fig, ax = plt.subplots()\n"
                         "fig")
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        self.assertEqual(cell.stdout, b"shown 0\nshown 0\n")
        self.assertEqual(cell.stderr, b"")
        self.assertEqual([f["type"] for f in cell.frames],
                         ["display_data", "display_data", "execute_result", "done"])
        for frame in cell.displays + [cell.result]:
            self.assertPng(frame)


    def test_figures_carry_their_chart(self):
        k = self.start()
        cell = k.execute("import matplotlib.pyplot as plt\n"
                         "plt.bar(['a', 'b'], [3, 5], label='n')\nplt.title('Bars')\nplt.xlabel('Letter')\n"
                         "plt.show()\n"
                         "fig = plt.figure()\nplt.plot([1, 2], [3, 4])\nfig")
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        shown = cell.displays[0]["data"]["application/vnd.warden.chart+json"]
        self.assertEqual((shown["type"], shown["title"], shown["x_label"]), ("bar", "Bars", "Letter"))
        self.assertEqual([(e["label"], e["group"], e["value"]) for e in shown["elements"]],
                         [("a", "n", 3), ("b", "n", 5)])
        result = cell.result["data"]["application/vnd.warden.chart+json"]
        self.assertEqual(result["type"], "line")
        self.assertEqual(result["elements"][0]["points"], [[1, 3], [2, 4]])


class PilTest(KernelTest):
    IMAGE = ("import numpy\nfrom PIL import Image\n"
             "image = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype('uint8')).convert('RGBA')\n")

    def assertOnePng(self, cell):
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        self.assertEqual(len(cell.displays), 1, cell.frames)
        png = base64.b64decode(cell.displays[0]["data"]["image/png"])
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")

    def test_show_displays_the_image(self):
        k = self.start()
        cell = k.execute(self.IMAGE + "image.show()\nprint('done')")
        self.assertOnePng(cell)
        self.assertEqual(cell.stdout, b"done\n")

    def test_save_to_a_file_displays_the_image_and_saves_it(self):
        k = self.start()
        self.assertOnePng(k.execute(self.IMAGE + "image.save('pil.png')"))
        self.assertTrue(os.path.getsize(os.path.join(self.workdir, "pil.png")) > 0)
        # Saving to a buffer shows nothing; nor does matplotlib's savefig,
        # which saves through PIL.
        cell = k.execute("import io\nimage.save(io.BytesIO(), format='png')\n"
                         "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig('fig.png')\nplt.close()")
        self.assertEqual(cell.displays, [], cell.frames)

    def test_pil_imported_before_the_kernel_is_patched_too(self):
        k = self.start(warm="PIL.Image")
        self.assertOnePng(k.execute(self.IMAGE + "image.show()"))


class IPythonDisplayTest(KernelTest):
    """IPython's display machinery (Debian's python3-ipython), as in E2B's
    IPython kernel, through this kernel's display_data."""

    CELL = ("from IPython.display import display, HTML, Markdown, JSON, display_html, publish_display_data\n"
            "display(HTML('<b>b</b>'), Markdown('# m'))\n"
            "handle = display(JSON({'k': 1}), display_id=True)\n"
            "handle.update(HTML('<i>again</i>'))\n"
            "display_html('<u>raw</u>', raw=True)\n"
            "publish_display_data({'text/plain': 'p', 'text/html': '<p>p</p>'})\n"
            "print(type(handle).__name__)")

    def assertDisplays(self, cell):
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        data = [d["data"] for d in cell.displays]
        self.assertEqual([d.get("text/html") or d.get("text/markdown") or d.get("application/json") for d in data],
                         ["<b>b</b>", "# m", {"k": 1}, "<i>again</i>", "<u>raw</u>", "<p>p</p>"])
        self.assertEqual(cell.stdout, b"DisplayHandle\n")

    def test_display_gives_display_data_and_imports_little(self):
        k = self.start()
        self.assertDisplays(k.execute(self.CELL))
        # Only what IPython.display needs: not IPython's terminal, magics or profiler.
        self.assertEqual(self.plain(k.execute("import sys\nsorted(m for m in sys.modules if m.startswith("
                                              "('IPython.terminal', 'IPython.core.magics', 'cProfile')))")), "[]")
        # Anything else of IPython completes the package.
        self.assertEqual(self.plain(k.execute("import IPython\n(IPython.get_ipython(), IPython.version_info[0])")),
                         "(None, 8)")
        self.assertEqual(self.plain(k.execute("from IPython import get_ipython, embed\nget_ipython() is None")), "True")

    def test_ipython_imported_whole_before_the_kernel_is_patched_too(self):
        k = self.start(warm="IPython,IPython.display")
        self.assertDisplays(k.execute(self.CELL))


class ErrorTest(KernelTest):
    def test_exception_traceback_shows_user_frames_only(self):
        k = self.start()
        k.execute("def f():\n    return 1 / 0\n")
        cell = k.execute("x = 1\nf()")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual([f["type"] for f in cell.frames], ["error", "done"])
        error = cell.error
        self.assertEqual((error["ename"], error["evalue"]), ("ZeroDivisionError", "division by zero"))
        self.assertClean(error, 1, 2)
        self.assertEqual(error["traceback"][0], "Traceback (most recent call last):")
        self.assertIn("    return 1 / 0", error["traceback"])
        self.assertEqual(error["traceback"][-1], "ZeroDivisionError: division by zero")

    def test_exception_type_and_message_exactly_as_raised(self):
        k = self.start()
        cell = k.execute("class FinalAnswerException(Exception):\n    pass\n"
                         "raise FinalAnswerException('safe:{\"a\": [1, 2]}')")
        self.assertEqual(cell.error["ename"], "FinalAnswerException")
        self.assertEqual(cell.error["evalue"], 'safe:{"a": [1, 2]}')
        # Lone surrogates cannot be UTF-8: the frame stays valid JSON anyway.
        cell = k.execute("raise ValueError('bad \\udcff')")
        self.assertEqual(cell.error["evalue"], "bad \ufffd")

    def test_chained_exception(self):
        k = self.start()
        cell = k.execute("try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('wrapped') from e")
        self.assertEqual(cell.error["ename"], "RuntimeError")
        self.assertClean(cell.error, 1)
        text = "\n".join(cell.error["traceback"])
        self.assertIn("KeyError: 'k'", text)
        self.assertIn("direct cause", text)

    def test_syntax_error_shows_line_and_caret(self):
        k = self.start()
        cell = k.execute("x = 1\ny = (2 +\n")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertClean(cell.error, 1)
        lines = cell.error["traceback"]
        self.assertTrue(lines[-1].startswith("SyntaxError: "), lines)
        self.assertIn("    y = (2 +", lines)
        self.assertTrue(any(line.strip() == "^" for line in lines), lines)
        # Found while compiling, not parsing: still the line and the cell.
        cell = k.execute("return 5")
        self.assertClean(cell.error, 2)
        self.assertIn("    return 5", cell.error["traceback"])

    def test_system_exit_is_an_error_and_kernel_survives(self):
        k = self.start()
        cell = k.execute("import sys\nsys.exit(3)")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("SystemExit", "3"))
        self.assertClean(cell.error, 1)
        cell = k.execute("exit()")             # site's exit() also closes sys.stdin
        self.assertEqual(cell.error["ename"], "SystemExit")
        self.assertEqual(self.plain(k.execute("1 + 1")), "2")
        self.assertEqual(k.execute("input()").error["ename"], "EOFError")

    def test_input_is_eof(self):
        k = self.start()
        cell = k.execute("input('name? ')")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual(cell.error["ename"], "EOFError")
        self.assertClean(cell.error, 1)
        self.assertEqual(cell.stdout, b"name? ")

    def test_bad_repr_is_the_cells_error(self):
        k = self.start()
        cell = k.execute("class B:\n    def __repr__(self): raise TypeError('no repr')\nB()")
        self.assertEqual(cell.done["status"], "error")
        self.assertEqual((cell.error["ename"], cell.error["evalue"]), ("TypeError", "no repr"))
        self.assertClean(cell.error, 1)


class InterruptTest(KernelTest):
    def interrupt_when_started(self, k, code):
        """Runs code (which prints 'started' and would then run for far
        longer than the collection timeout), interrupts it then; returns the
        cell. A cell that ignored the interrupt times the collection out."""
        sent = []
        chunks = []

        def on_chunk(name, data):
            chunks.append((name, data, round(time.monotonic() - t0, 3)))
            if b"started" in data and not sent:
                sent.append(True)
                k.interrupt()

        t0 = time.monotonic()
        try:
            cell = k.execute(code, timeout=10, on_chunk=on_chunk)
        except TimeoutError as e:
            # Which half failed: the output never came, or the interrupt
            # did not end the cell (the output with its seconds since the
            # cell was sent).
            raise AssertionError("%s; interrupt sent: %s; output: %r" % (e, bool(sent), chunks)) from e
        self.assertTrue(sent, cell.frames)
        return cell

    def check_interrupted(self, k, code):
        self.assertEqual(k.execute("x = 10").done["status"], "ok")
        cell = self.interrupt_when_started(k, code)
        self.assertEqual(cell.done["status"], "interrupted", cell.frames)
        self.assertEqual(cell.done["execution_count"], 2)
        self.assertEqual(cell.error["ename"], "KeyboardInterrupt")
        self.assertClean(cell.error, 2)
        cell = k.execute("x + 1")
        self.assertEqual(self.plain(cell), "11")
        self.assertEqual(cell.result["execution_count"], 3)

    def test_interrupt_busy_loop(self):
        k = self.start()
        self.check_interrupted(k, "print('started', flush=True)\nwhile True:\n    x += 0")

    def test_interrupt_sleep(self):
        k = self.start()
        self.check_interrupted(k, "import time\nprint('started')\ntime.sleep(100)")

    def test_interrupt_subprocess(self):
        k = self.start()
        self.check_interrupted(k, "import subprocess\nprint('started')\nsubprocess.run(['sleep', '100'])")

    def test_interrupt_shell_line(self):
        k = self.start()
        self.check_interrupted(k, "print('started')\n!sleep 100")

    def test_interrupt_await(self):
        k = self.start()
        k.execute("import asyncio\nticks = 0\nasync def tick():\n    global ticks\n"
                  "    while True:\n        ticks += 1\n        await asyncio.sleep(0.01)\n")
        cell = self.interrupt_when_started(
            k, "print('started')\nawait asyncio.gather(tick(), asyncio.sleep(100))")
        self.assertEqual(cell.done["status"], "interrupted", cell.frames)
        self.assertEqual(cell.error["ename"], "KeyboardInterrupt")
        # The user's frames where the interrupt found the cell: the await
        # (the loop was waiting), or tick (it was running); never asyncio's.
        self.assertOnlyCellFrames(cell.error)
        # The interrupted coroutines do not run on in later cells' loops.
        cell = k.execute("before = ticks\nawait asyncio.sleep(0.1)\nticks - before")
        self.assertEqual(self.plain(cell), "0")

    def assertOnlyCellFrames(self, error):
        """A traceback of at least one frame, every one a cell's."""
        lines = error["traceback"]
        frames = [line for line in lines if line.startswith("  File ")]
        self.assertTrue(frames, lines)
        self.assertTrue(all(line.startswith('  File "<cell ') for line in frames), lines)

    def test_interrupt_in_asyncio_machinery_cancels_the_cell(self):
        # The SIGINT lands in asyncio's own code: a callback the loop runs
        # sends it (os.kill is C, so the handler runs in the loop's frame,
        # as it does for a SIGINT that comes while the loop makes itself,
        # schedules or waits). The cell ends interrupted at its await, with
        # its finally blocks run, and the loop serves the next cell.
        k = self.start()
        cell = k.execute("import asyncio, os, signal\n"
                         "async def wait():\n"
                         "    try:\n"
                         "        await asyncio.sleep(100)\n"
                         "    finally:\n"
                         "        print('cleaned up')\n"
                         "asyncio.get_running_loop  # (no loop runs yet)\n"
                         "async def main():\n"
                         "    asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)\n"
                         "    await wait()\n"
                         "await main()", timeout=10)
        self.assertEqual(cell.done["status"], "interrupted", cell.frames)
        self.assertEqual(cell.error["ename"], "KeyboardInterrupt")
        self.assertOnlyCellFrames(cell.error)
        self.assertIn('  File "<cell 1>", line 4, in wait', cell.error["traceback"])
        self.assertEqual(cell.stdout, b"cleaned up\n")
        self.assertEqual(self.plain(k.execute("await asyncio.sleep(0.01)\n'loop ok'")), "'loop ok'")

    def test_interrupt_between_a_cells_statements_and_its_result_is_kept(self):
        # A SIGINT whose handler runs while only the kernel's own code runs
        # inside a cell (here called by hand with the kernel's frame, as
        # when it lands between the cell's statements and its trailing
        # expression) is kept, and raised at the first line of user code
        # that runs next: the cell is interrupted there, never run on.
        k = self.start()
        cell = k.execute("import sys, time\n"
                         "sys.modules['_warden_kernel']._on_sigint(2, sys._getframe(1))\n"
                         "went_on = True\n"
                         "time.sleep(100)", timeout=10)
        self.assertEqual(cell.done["status"], "interrupted", cell.frames)
        lines = cell.error["traceback"]
        self.assertEqual([line for line in lines if line.startswith("  File ")],
                         ['  File "<cell 1>", line 4, in <module>'], lines)
        self.assertClean(cell.error, 1)
        self.assertEqual(self.plain(k.execute("went_on")), "True")
        # Kept for the cell, never for the next one.
        k.execute("sys.modules['_warden_kernel']._on_sigint(2, sys._getframe(1))")
        self.assertEqual(self.plain(k.execute("time.sleep(0.2)\n'not interrupted'")), "'not interrupted'")

    def test_cell_may_catch_keyboard_interrupt(self):
        k = self.start()
        cell = self.interrupt_when_started(
            k, "import time\ntry:\n    print('started')\n    time.sleep(100)\n"
               "except KeyboardInterrupt:\n    caught = True\ncaught")
        self.assertEqual(self.plain(cell), "True")

    def test_sigint_while_idle_is_ignored(self):
        k = self.start()
        self.assertEqual(k.execute("x = 1").done["status"], "ok")
        for _ in range(3):
            k.interrupt()
            time.sleep(0.02)

        # ... also while a frame is half received.
        def interrupt():
            k.interrupt()
            time.sleep(0.05)

        for split in (4, 12, 16):
            cell_id = k.send_execute("x += 1\nx", split=split, between=interrupt)
            cell = k.collect(cell_id, timeout=10)
            self.assertEqual(cell.done["status"], "ok", cell.frames)
        self.assertEqual(self.plain(k.execute("x")), "4")
        self.assertIsNone(k.proc.poll())

    def test_interrupt_storm_never_breaks_a_frame(self):
        # SIGINT at random moments (often between cells, or while frames are
        # written) must only ever interrupt user code.
        k = self.start()
        k.execute("n = 0\nclass D:\n    def _repr_html_(self): return 'd' * 100000")
        stop = threading.Event()

        def storm():
            while not stop.is_set():
                k.interrupt()
                time.sleep(0.0005)

        thread = threading.Thread(target=storm)
        thread.start()
        try:
            statuses = set()
            for _ in range(40):
                cell = k.execute("n += 1\ndisplay(D())\nD()", timeout=10)
                statuses.add(cell.done["status"])
                self.assertIn(cell.done["status"], ("ok", "interrupted"), cell.frames)
                if cell.error:
                    self.assertEqual(cell.error["ename"], "KeyboardInterrupt")
        finally:
            stop.set()
            thread.join()
        self.assertEqual(self.plain(k.execute("'alive'")), "'alive'")
        self.assertIsNone(k.proc.poll())


    def test_interrupt_during_a_blocked_frame_write_waits_for_the_frame(self):
        # Nobody reads the channel, so the kernel blocks writing a frame
        # far larger than the socket buffer; SIGINTs then must not cut it.
        k = self.start()
        k.execute("class Big:\n    def _repr_html_(self): return 'b' * (4 << 20)")
        cell_id = k.send_execute("display(Big())\nafter = True")
        k.wait_unread(64 << 10)  # the kernel is inside the 4 MiB frame's write
        for _ in range(3):
            k.interrupt()
            time.sleep(0.02)
        cell = k.collect(cell_id, timeout=10)
        self.assertEqual([f["type"] for f in cell.frames], ["display_data", "error", "done"])
        self.assertEqual(len(cell.displays[0]["data"]["text/html"]), 4 << 20)
        self.assertEqual(cell.error["ename"], "KeyboardInterrupt")
        self.assertClean(cell.error, 2)
        self.assertEqual(cell.done["status"], "interrupted")
        self.assertEqual(self.plain(k.execute("'after' in globals()")), "False")


class OutputIsDataTest(KernelTest):
    def test_forged_frames_invalid_utf8_and_nul_pass_through(self):
        k = self.start()
        cell = k.execute("import sys\n"
                         "print('12\\n{\"type\":\"done\"}')\n"
                         "sys.stdout.buffer.write(b'\\xff\\xfe')\n"
                         "print('\\udcff|\\ud800|a\\x00b|\\x1b[31mred\\x1b[0m')\n"
                         "sys.stderr.write('5\\n{\"type\":\"error\"}\\x00');")
        self.assertEqual([f["type"] for f in cell.frames], ["done"])
        self.assertEqual(cell.done["status"], "ok")
        self.assertEqual(cell.stdout, b'12\n{"type":"done"}\n\xff\xfe\xff|\\ud800|a\x00b|\x1b[31mred\x1b[0m\n')
        self.assertEqual(cell.stderr, b'5\n{"type":"error"}\x00')

    def test_replaced_stdout_is_flushed_and_restored(self):
        k = self.start()
        cell = k.execute("import sys, io\n"
                         "sys.stdout = open(1, 'w', closefd=False)  # block-buffered\n"
                         "print('buffered')")
        self.assertEqual(cell.stdout, b"buffered\n")
        k.execute("sys.stdout = io.StringIO()\nprint('hidden')\nsys.stderr.close()")
        cell = k.execute("import sys\nprint('visible')\nprint('err', file=sys.stderr)")
        self.assertEqual((cell.stdout, cell.stderr), (b"visible\n", b"err\n"))


class ProcessTest(KernelTest):
    def test_children_do_not_inherit_the_channel(self):
        k = self.start()
        cell = k.execute("import os\nos.system('if [ -e /proc/self/fd/%s ]; then echo open; else echo closed; fi')"
                         % os.environ.get("WARDEN_CHANNEL_FD", "3"))
        self.assertEqual(cell.stdout, b"closed\n")

    def test_forked_child_falling_off_the_cell_stays_silent(self):
        k = self.start()
        cell = k.execute("import os\npid = os.fork()\n"
                         "if pid == 0:\n    print('child')\n"
                         "else:\n    os.waitpid(pid, 0)\n    print('reaped')\n")
        # The child exited at the end of the cell without a done frame, so
        # done came from the parent, after it reaped the child.
        self.assertEqual(cell.stdout, b"child\nreaped\n")
        self.assertEqual(self.plain(k.execute("'next'")), "'next'")

    def test_os_exit_and_crash_end_the_kernel(self):
        k = self.start()
        with self.assertRaises(EOFError):
            k.execute("import os\nos._exit(7)", timeout=10)
        self.assertEqual(k.proc.wait(timeout=10), 7)
        k = self.start()
        seen = []
        with self.assertRaises(EOFError):
            k.execute("import ctypes\nctypes.string_at(0)", timeout=10,
                      on_chunk=lambda name, data: seen.append(data) if name == "stderr" else None)
        k.proc.wait(timeout=10)
        # faulthandler leaves a Python traceback naming the cell on stderr.
        stderr = b"".join(seen) + k.proc.stderr.read()
        self.assertIn(b"Fatal Python error: Segmentation fault", stderr)
        self.assertIn(b'File "<cell 1>", line 2', stderr)


class LineSyntaxTest(KernelTest):
    """IPython's `!cmd`, `x = !cmd` and `%magic` lines (warden_magics.py)."""

    def test_shell_line_streams_its_output_and_sets_exit_code(self):
        k = self.start()
        opener = GateOpener(self.workdir, [("gate", [("stdout", b"first")])])
        cell = k.execute("!echo first; for i in $(seq 2000); do [ -e gate ] && break; sleep 0.01; done; "
                         "echo second; echo err >&2; exit 3", on_chunk=opener)
        self.assertEqual(cell.done["status"], "ok", cell.frames)
        self.assertEqual(cell.stdout, b"first\nsecond\n")
        self.assertEqual(cell.stderr, b"err\n")
        self.assertEqual(self.plain(k.execute("_exit_code")), "3")

    def test_captured_output_is_a_list_of_lines(self):
        k = self.start()
        cell = k.execute("x = !echo hi; echo there >&2\nx, x.s, x.n, x.l, _exit_code")
        self.assertEqual(self.plain(cell), "(['hi', 'there'], 'hi there', 'hi\\nthere', ['hi', 'there'], 0)")
        self.assertEqual(cell.stdout, b"")
        self.assertEqual(self.plain(k.execute("!!echo a")), "['a']")
        cell = k.execute("def f():\n    lines = !echo inner\n    return lines\nf()")
        self.assertEqual(self.plain(cell), "['inner']")

    def test_python_variables_expand_in_commands(self):
        k = self.start()
        cell = k.execute("n = 6\n!echo {n * 7} $n\n!awk 'BEGIN { print 1 + 1 }'")
        self.assertEqual(cell.stdout, b"42 6\n2\n")

    def test_escapes_begin_statements_anywhere_in_blocks(self):
        k = self.start()
        cell = k.execute("for i in range(2):\n    !echo {i}\nif True:\n    r = !echo in\n"
                         "!echo a \\\n   b\nr")
        self.assertEqual(cell.stdout, b"0\n1\na b\n")
        self.assertEqual(self.plain(cell), "['in']")

    def test_python_with_bangs_and_percents_is_left_alone(self):
        k = self.start()
        cell = k.execute("!true\nx = 1\ny = x != 1\ns = \"!foo\"\nt = \'\'\'\n!bar\n%baz\n\'\'\'\n"
                         "u = (10\n     % 3,\n     2)\nv = {'a': 1}\nw = v['a'] != 2\n(y, s, t, u, w, 7 % 3)")
        self.assertEqual(self.plain(cell), "(False, '!foo', '\\n!bar\\n%baz\\n', (1, 2), True, 1)")

    def test_real_syntax_errors_stay_syntax_errors(self):
        k = self.start()
        cell = k.execute("x = (1,\n!2)")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertIn('File "<cell 1>", line 2', "\n".join(cell.error["traceback"]))
        cell = k.execute("s = '!x'\ndef (")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertIn("line 2", "\n".join(cell.error["traceback"]))
        cell = k.execute("!echo never\n1 +")
        self.assertEqual(cell.error["ename"], "SyntaxError")
        self.assertEqual(cell.stdout, b"")   # nothing ran
        self.assertNotIn("During handling", "\n".join(cell.error["traceback"]))

    def test_unknown_magics_are_usage_errors(self):
        k = self.start()
        cell = k.execute("print('before')\n%timeit 1")
        self.assertEqual(cell.stdout, b"before\n")
        self.assertEqual(cell.error["ename"], "UsageError")
        self.assertIn("%timeit", cell.error["evalue"])
        self.assertIn("%pip", cell.error["evalue"])
        self.assertClean(cell.error, 1)
        self.assertNotIn("warden_magics", "\n".join(cell.error["traceback"]))
        self.assertEqual(cell.error["traceback"][-1], "UsageError: " + cell.error["evalue"])
        self.assertEqual(k.execute("x = %who").error["ename"], "UsageError")
        cell = k.execute("%%bash\nls -la /")
        self.assertEqual(cell.error["ename"], "UsageError")
        self.assertIn("%%bash", cell.error["evalue"])
        # What Warden always does may be asked for.
        self.assertEqual(self.plain(k.execute("%matplotlib inline\n1")), "1")

    def test_shell_line_output_follows_a_redirected_stdout(self):
        k = self.start()
        cell = k.execute("import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
                         "    !echo caught\nbuf.getvalue()")
        self.assertEqual(self.plain(cell), "'caught\\n'")
        self.assertEqual(cell.stdout, b"")


class PipTest(KernelTest):
    """`%pip install` and `!pip install` from a wheelhouse, as in a sandbox
    (the environment Warden gives kernels, kernel/zygote.cc)."""

    def start_with_wheelhouse(self):
        sys.path.insert(0, os.path.join(HERE, "..", "testing"))
        from wheels import build_wheel, pip_environment
        self.wheelhouse = os.path.join(self.workdir, "wheelhouse")
        build_wheel(self.wheelhouse, "tinypkg", "1.0", init="VALUE = 42\n", requires=["depa>=0.5"])
        build_wheel(self.wheelhouse, "depa", "0.4")
        build_wheel(self.wheelhouse, "depa", "0.5", init="VERSION = '0.5'\n")
        env = {"MPLCONFIGDIR": self.mpl_dir,
               "PATH": "%s:/usr/bin:/bin" % os.path.join(HERE, "..", "bin"),
               **pip_environment(os.path.join(self.workdir, ".local"), self.wheelhouse)}
        kernel = KernelProcess([PYTHON, KERNEL], env=env, cwd=self.workdir)
        self.addCleanup(kernel.close)
        return kernel

    def test_install_then_import_in_the_same_session(self):
        k = self.start_with_wheelhouse()
        # Imported (and missed) before the install: the import system must
        # look at the user site afresh afterwards.
        self.assertEqual(k.execute("import tinypkg").error["ename"], "ModuleNotFoundError")
        cell = k.execute("%pip install tinypkg")
        self.assertEqual(cell.done["status"], "ok", cell.stderr)
        self.assertIn(b"Successfully installed depa-0.5 tinypkg-1.0", cell.stdout)
        self.assertEqual(self.plain(k.execute("import tinypkg, depa\n(tinypkg.VALUE, depa.VERSION)")),
                         "(42, '0.5')")
        site = os.path.join(self.workdir, ".local", "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        cell = k.execute("!pip install tinypkg numpy")
        self.assertIn(b"Requirement already satisfied: tinypkg in %s (1.0)" % site.encode(), cell.stdout)
        self.assertIn(b"Requirement already satisfied: numpy in /usr/lib/python3/dist-packages", cell.stdout)

    def test_missing_package_fails_naming_the_wheelhouse(self):
        k = self.start_with_wheelhouse()
        cell = k.execute("!pip install nosuchpkg\n_exit_code")
        self.assertEqual(self.plain(cell), "1")
        self.assertIn(b"nosuchpkg", cell.stderr)
        self.assertIn(b"not in the wheelhouse %s" % self.wheelhouse.encode(), cell.stderr)
        self.assertIn(b"no network", cell.stderr)


class CountTest(KernelTest):
    def test_execution_count_increments_whatever_the_outcome(self):
        k = self.start()
        counts = []
        counts.append(k.execute("a = 1").done["execution_count"])
        counts.append(k.execute("1 / 0").done["execution_count"])
        counts.append(k.execute("def (").done["execution_count"])
        cell_id = k.send_execute("import time\ntime.sleep(100)")
        time.sleep(0.1)
        k.interrupt()
        cell = k.collect(cell_id, timeout=10)
        self.assertEqual(cell.done["status"], "interrupted")
        counts.append(cell.done["execution_count"])
        cell = k.execute("a")
        self.assertEqual(cell.result["execution_count"], 5)
        counts.append(cell.done["execution_count"])
        self.assertEqual(counts, [1, 2, 3, 4, 5])


class SnapshotTest(KernelTest):
    """snapshot and restore frames (warden_snapshot.py), between two kernels
    outside any sandbox; the workspace is each kernel's working directory."""

    def snapshot_into_fresh_kernel(self, k, code_after, inspect=None):
        archive = os.path.join(self.workdir, "..", os.path.basename(self.workdir) + ".snapshot")
        self.addCleanup(lambda: os.path.exists(archive) and os.unlink(archive))
        taken = k.request("snapshot", {"archive": archive, "workspace": self.workdir})
        self.assertEqual(taken["type"], "snapshot", taken)
        self.assertNotIn("error", taken)
        self.assertEqual(os.stat(archive).st_mode & 0o777, 0o600)
        if inspect:
            inspect(archive)
        old_workdir = self.workdir
        self.workdir = tempfile.mkdtemp(prefix="warden-kernel-test-")
        self.addCleanup(shutil.rmtree, self.workdir, ignore_errors=True)
        fresh = self.start()
        restored = fresh.request("restore", {"archive": archive, "workspace": self.workdir})
        self.assertEqual(restored["type"], "restored", restored)
        self.assertNotIn("error", restored)
        self.assertFalse(os.path.exists(archive))
        return taken, restored, fresh, fresh.execute(code_after), old_workdir

    def test_values_functions_classes_modules_files_and_count_survive(self):
        k = self.start()
        k.execute("import json as j\nimport pandas as pd\n"
                  "df = pd.DataFrame({'a': [1, 2, 3]})\n"
                  "shared = [1]\nalias = shared\n"
                  "def twice(v):\n    return 2 * v + offset\noffset = 1\n"
                  "class Point:\n    def __init__(self, x): self.x = x\n"
                  "p = Point(7)\nsquare = lambda v: v * v\n"
                  "open('notes.txt', 'w').write('hello')\nos = __import__('os')\n"
                  "os.makedirs('sub/dir')\nopen('sub/dir/x.bin', 'wb').write(bytes(range(256)))")
        taken, restored, fresh, cell, _ = self.snapshot_into_fresh_kernel(
            k, "alias.append(2)\n(int(df.a.sum()), twice(3), p.x, type(p).__name__, square(4), "
               "j.dumps(shared), open('notes.txt').read(), len(open('sub/dir/x.bin','rb').read()))")
        self.assertEqual(taken["uncaptured"], {})
        self.assertEqual(restored["failed"], {})
        self.assertEqual(restored["execution_count"], 1)
        self.assertEqual(self.plain(cell), "(6, 7, 7, 'Point', 16, '[1, 2]', 'hello', 256)")
        self.assertEqual(cell.done["execution_count"], 2)

    def test_uncapturable_objects_are_named_and_the_rest_is_kept(self):
        k = self.start()
        k.execute("import socket, threading\n"
                  "sock = socket.socket()\nf = open('data.txt', 'w')\n"
                  "gen = (i for i in range(3))\nnext(gen)\n"
                  "t = threading.Thread(target=lambda: None)\n"
                  "nested = {'inner': [sock]}\nkept = 41")
        taken, restored, fresh, cell, _ = self.snapshot_into_fresh_kernel(
            k, "(kept + 1, [n for n in ('sock', 'f', 'gen', 't', 'nested') if n in globals()])")
        self.assertEqual(sorted(taken["uncaptured"]), ["f", "gen", "nested", "sock", "t"])
        self.assertIn("an open socket", taken["uncaptured"]["nested"])
        self.assertIn("a generator", taken["uncaptured"]["gen"])
        self.assertEqual(self.plain(cell), "(42, [])")

    @staticmethod
    def archive_header(archive):
        """The JSON header of an archive in warden_snapshot's FORMAT."""
        with open(archive, "rb") as f:
            magic = f.read(16)
            (length,) = struct.unpack("<Q", f.read(8))
            return magic, json.loads(f.read(length))

    ARRAYS = ("import numpy as np, pandas as pd, hashlib\n"
              "big = np.random.default_rng(7).random((512, 1024))\n"     # 4 MiB
              "alias = big\n"
              "strided = big[::2, 3:9]\n"
              "fortran = np.asfortranarray(big[:100, :50])\n"
              "frozen = np.arange(5, dtype=np.int16)\nfrozen.flags.writeable = False\n"
              "df = pd.DataFrame(big[:, :8], columns=list('abcdefgh'))\n"
              "df['label'] = ['row%d' % i for i in range(512)]\n"
              "digest = hashlib.sha256(big.tobytes()).hexdigest()\n"
              "expected = (big[::2, 3:9].copy(), fortran.copy(), df.copy())\n")
    ARRAYS_CHECK = ("(hashlib.sha256(big.tobytes()).hexdigest() == digest, alias is big, "
                    "big.flags.writeable, frozen.flags.writeable, frozen.tolist(), frozen.dtype.name, "
                    "np.array_equal(strided, expected[0]), fortran.flags.f_contiguous, "
                    "np.array_equal(fortran, expected[1]), df.equals(expected[2]), "
                    "[str(t) for t in df.dtypes.unique()])")
    ARRAYS_EXPECTED = ("(True, True, True, False, [0, 1, 2, 3, 4], 'int16', True, True, True, True, "
                       "['float64', 'object'])")

    def test_arrays_and_frames_round_trip_exactly_with_their_buffers_out_of_band(self):
        k = self.start()
        k.execute(self.ARRAYS)
        headers = []
        taken, restored, fresh, cell, _ = self.snapshot_into_fresh_kernel(
            k, self.ARRAYS_CHECK, inspect=lambda a: headers.append(self.archive_header(a)))
        magic, header = headers[0]
        self.assertEqual(magic, b"WARDEN-SNAPSHOT2")
        self.assertEqual(header["pickler"], "pickle")      # no cell-made code: the C pickler
        self.assertGreaterEqual(sum(header["buffers"]), 512 * 1024 * 8)
        self.assertLess(header["pickle_bytes"], 512 * 1024)  # the array is not in the stream
        self.assertEqual((taken["uncaptured"], restored["failed"]), ({}, {}))
        self.assertEqual(self.plain(cell), self.ARRAYS_EXPECTED)
        self.assertNotIn("dill", self.plain(fresh.execute("import sys\nsorted(m for m in sys.modules if m == 'dill')")))
        # The restored arrays are ordinary, writable ones.
        self.assertEqual(self.plain(fresh.execute("big[0, 0] = -1.0\nalias[0, 0]")), "-1.0")

    def test_cell_made_functions_go_through_dill_and_arrays_stay_out_of_band(self):
        k = self.start()
        k.execute(self.ARRAYS + "def total(a):\n    return float(a.sum())\nt = total(big)\n"
                  "class Box:\n    def __init__(self, v): self.v = v\nbox = Box(big)\n")
        headers = []
        taken, restored, fresh, cell, _ = self.snapshot_into_fresh_kernel(
            k, "(total(big) == t, box.v is big, %s)" % self.ARRAYS_CHECK,
            inspect=lambda a: headers.append(self.archive_header(a)))
        header = headers[0][1]
        self.assertEqual(header["pickler"], "dill")
        self.assertLess(header["pickle_bytes"], 512 * 1024)
        self.assertEqual((taken["uncaptured"], restored["failed"]), ({}, {}))
        self.assertEqual(self.plain(cell), "(True, True, %s)" % self.ARRAYS_EXPECTED)

    def test_an_archive_of_the_older_tar_form_is_still_restored(self):
        import subprocess, tarfile
        archive = os.path.join(self.workdir, "old.tar")
        # As the older kernel pickled it: dill, everything in-band, a lambda of __main__.
        blob = subprocess.run([PYTHON, "-c", "import dill, sys; sys.stdout.buffer.write(dill.dumps("
                               "{'x': 41, 'twice': lambda v: 2 * v}, protocol=dill.HIGHEST_PROTOCOL))"],
                              check=True, capture_output=True).stdout
        meta = json.dumps({"execution_count": 3, "modules": {"j": "json"}, "python": "3.11"}).encode()
        with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in (("snapshot.json", meta), ("namespace.dill", blob), ("workspace/a.txt", b"old")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        k = self.start()
        answer = k.request("restore", {"archive": archive, "workspace": self.workdir})
        self.assertEqual(answer["type"], "restored", answer)
        self.assertNotIn("error", answer)
        self.assertEqual(answer["execution_count"], 3)
        self.assertEqual(self.plain(k.execute("(twice(x) + 1, j.dumps(1), open('a.txt').read())")),
                         "(83, '1', 'old')")

    def test_a_truncated_archive_is_an_error_answer_and_the_kernel_lives_on(self):
        k = self.start()
        k.execute("import numpy as np\nbig = np.ones(1 << 20)")
        archive = os.path.join(self.workdir, "..", os.path.basename(self.workdir) + ".snapshot")
        self.addCleanup(lambda: os.path.exists(archive) and os.unlink(archive))
        self.assertNotIn("error", k.request("snapshot", {"archive": archive, "workspace": self.workdir}))
        os.truncate(archive, os.stat(archive).st_size // 2)   # half way through the array
        fresh = self.start()
        answer = fresh.request("restore", {"archive": archive, "workspace": self.workdir})
        self.assertEqual(answer["type"], "restored")
        self.assertIn("truncated", answer.get("error", ""))
        self.assertEqual(self.plain(fresh.execute("'big' in globals(), 1 + 1")), "(False, 2)")

    def test_a_bad_archive_is_an_error_answer_and_the_kernel_lives_on(self):
        k = self.start()
        archive = os.path.join(self.workdir, "bad.tar")
        with open(archive, "wb") as f:
            f.write(b"not a tar")
        answer = k.request("restore", {"archive": archive, "workspace": self.workdir})
        self.assertEqual(answer["type"], "restored")
        self.assertIn("error", answer)
        self.assertEqual(self.plain(k.execute("1 + 1")), "2")


if __name__ == "__main__":
    unittest.main()
