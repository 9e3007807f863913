"""HumanEval (Python) and HumanEval-X (JavaScript) as programs to run: the
canonical solution of each problem with its tests, and a deliberately wrong
solution of each, written as JSON lines for warden_bench / anchor_bench
(`{"id", "language", "code", "expect", "judge"}`; see bench/bench_util.h).
bench/workloads/README.md says where the data comes from and how a problem
is judged."""

import gzip
import json
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent
HUMANEVAL = HERE / "workloads" / "humaneval" / "HumanEval.jsonl.gz"
HUMANEVAL_JS = HERE / "workloads" / "humaneval-x-js" / "humaneval_js.jsonl.gz"

# Fail as published (bench/workloads/README.md): two fail their own
# assertions, one needs the npm module js-md5.
JS_KNOWN_FAILURES = {"JavaScript/112", "JavaScript/155", "JavaScript/162"}

# Wraps the entry point so that whatever it returns is changed: the tests
# must then fail by assertion, not by a crash.
PY_WRONG = '''

def __warden_perturb(r):
    if isinstance(r, bool):
        return not r
    if isinstance(r, (int, float)):
        return r + 1
    if isinstance(r, str):
        return r + "x"
    if isinstance(r, list):
        return r + [None]
    if isinstance(r, tuple):
        return r + (None,)
    if isinstance(r, dict):
        return {{**r, "__warden": 1}}
    if r is None:
        return 0
    return object()

__warden_orig = {name}
def {name}(*args, **kwargs):
    return __warden_perturb(__warden_orig(*args, **kwargs))
'''

JS_WRONG = '''
const __warden_perturb = (r) => {{
  if (typeof r === "boolean") return !r;
  if (typeof r === "number") return r + 1;
  if (typeof r === "string") return r + "x";
  if (Array.isArray(r)) return [...r, null];
  if (r === null || r === undefined) return 0;
  if (typeof r === "object") return {{...r, __warden: 1}};
  return Symbol("wrong");
}};
const {name} = (...args) => __warden_perturb(__warden_orig_{name}(...args));
'''


def _load(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_programs():
    """(canonical, wrong) program lists for the 164 Python problems."""
    canonical, wrong = [], []
    for p in _load(HUMANEVAL):
        name = p["entry_point"]
        tail = "\n" + p["test"] + "\n" + "check(%s)\n" % name
        body = p["prompt"] + p["canonical_solution"]
        canonical.append({"id": p["task_id"], "language": "python", "code": body + tail,
                          "expect": "pass", "judge": "ok"})
        wrong.append({"id": p["task_id"], "language": "python",
                      "code": body + PY_WRONG.format(name=name) + tail,
                      "expect": "fail", "judge": "ok"})
    return canonical, wrong


def _js_entry_point(prompt):
    """The function the canonical solution completes: the last one the
    prompt declares (`declaration` holds the first, which may be a helper)."""
    matches = list(re.finditer(r"(?:const|let|var)\s+(\w+)\s*=|function\s+(\w+)\s*\(", prompt))
    if not matches:
        raise ValueError("no entry point in %r" % prompt[-200:])
    m = matches[-1]
    return m.group(1) or m.group(2), m.start(), m.group(0)


def humaneval_js_programs():
    """(canonical, wrong) program lists for the 164 JavaScript problems."""
    canonical, wrong = [], []
    for p in _load(HUMANEVAL_JS):
        name, cut, binding = _js_entry_point(p["prompt"])
        canonical.append({"id": p["task_id"], "language": "javascript",
                          "code": p["prompt"] + p["canonical_solution"] + "\n" + p["test"],
                          "expect": "fail" if p["task_id"] in JS_KNOWN_FAILURES else "pass",
                          "judge": "quiet"})
        # Rename the declared function; the wrapper takes its name.
        renamed = binding.replace(name, "__warden_orig_" + name, 1)
        prompt = p["prompt"][:cut] + renamed + p["prompt"][cut + len(binding):]
        wrong.append({"id": p["task_id"], "language": "javascript",
                      "code": prompt + p["canonical_solution"] + "\n" + JS_WRONG.format(name=name) +
                      "\n" + p["test"],
                      "expect": "fail", "judge": "quiet"})
    return canonical, wrong


def write_jsonl(programs, path):
    with open(path, "w") as f:
        for p in programs:
            f.write(json.dumps(p) + "\n")


def write_all(out_dir):
    """Writes the four program files into out_dir; returns {name: path}."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    py_ok, py_wrong = humaneval_programs()
    js_ok, js_wrong = humaneval_js_programs()
    for name, programs in (("python_canonical", py_ok), ("python_wrong", py_wrong),
                           ("js_canonical", js_ok), ("js_wrong", js_wrong)):
        files[name] = out_dir / (name + ".jsonl")
        write_jsonl(programs, files[name])
    return files


if __name__ == "__main__":
    import sys
    for name, path in write_all(sys.argv[1] if len(sys.argv) > 1 else "/tmp/warden-workloads").items():
        print(name, path)
