"""docs/python.md's examples run: its ```python blocks, in order, in one
namespace, against the test's wardend (the agent's model is scripted)."""
import os
import pathlib
import re

from conftest import text_step, tool_step

DOC = pathlib.Path(os.environ["WARDEN_TESTS_DIR"]).parent / "docs" / "python.md"


def test_the_python_blocks_of_docs_python_md_run(wardend, model, tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert len(blocks) >= 8, "docs/python.md lost its examples?"
    model.script([tool_step("print(sum(p for p in range(2, 1000) if all(p % d for d in range(2, p))))",
                            "Summing."), text_step("76127")])
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, "docs/python.md block %d" % number, "exec"), namespace)
        except Exception as e:
            raise AssertionError("docs/python.md block %d failed: %r\n%s" % (number, e, block)) from e
    out = capsys.readouterr().out
    assert "answer: 76127 DONE" in out, out
    for line in ("got: step 1\n", "MEMORY_LIMIT\n", "IDLE 3\n", "['0', '1', '4', '9']\n", "42 b'two'\n"):
        assert line in out, out
    assert "WALL_TIMEOUT the cell ran past its 1000 ms wall-clock limit" in out, out
