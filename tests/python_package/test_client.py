"""warden.Client against a real wardend: every Executor and Agent method,
callbacks in order, errors, retries, and concurrency from threads."""
import concurrent.futures
import io
import json
import threading

import pytest

import warden
from conftest import QUOTA_SESSIONS, TOKEN_QUOTA, bash_image, text_step, tool_step

WAIT_S = 60  # every wait on a condition; a hang fails the test


def started_event():
    """An on_stdout callback that sets an Event once the cell printed 'started'."""
    event, seen = threading.Event(), []

    def on_stdout(text):
        seen.append(text)
        if "started" in "".join(seen):
            event.set()
    return event, on_stdout


# ---- one-shot

def test_run_returns_an_execution_with_output_value_and_usage(client):
    ex = client.run('print("hello")\n6 * 7')
    assert ex.ok and ex.outcome == "OK", ex
    assert (ex.stdout, ex.stderr, ex.text) == ("hello\n", "", "42")
    assert ex.stdout_bytes == b"hello\n"
    assert ex.execution_count == 1 and ex.session_id is None and ex.error is None
    assert ex.peak_memory_bytes > 0 and ex.violation is None
    assert [r.is_result for r in ex.results] == [True]
    assert "outcome=OK" in repr(ex) and "text='42'" in repr(ex)


def test_a_raising_program_is_an_outcome_not_an_exception(client):
    ex = client.run("def f():\n    return 1 / 0\nf()")
    assert (ex.ok, ex.outcome) == (False, "ERROR")
    assert (ex.error.name, ex.error.value) == ("ZeroDivisionError", "division by zero")
    assert any("in f" in line for line in ex.error.traceback), ex.error.traceback


def test_languages_files_and_limits(client):
    js = client.run("const fs = require('fs'); console.log(fs.readFileSync('in.txt', 'utf8').toUpperCase())",
                    language="javascript", files={"in.txt": "abc"})
    assert js.ok and js.stdout == "ABC\n", js
    sh = client.run("cat data/a.bin | wc -c; exit 3", language="bash",
                    files={"data/a.bin": io.BytesIO(b"12345")})
    assert sh.outcome == "ERROR" and sh.exit_code == 3 and sh.stdout.strip() == "5", sh
    slow = client.run("while True: pass", timeout=1)
    assert slow.outcome == "WALL_TIMEOUT" and "wall-clock" in slow.message, slow
    assert client.run("x = bytearray(64 << 20)", memory_mb=256).ok


def test_callbacks_stream_in_the_order_the_code_produces_them(client):
    code = "\n".join([
        "import base64, sys",
        'print("first", flush=True)',
        'display({"text/plain": "a picture", "image/png": base64.b64encode(b"\\x89PNG-ish").decode()}, raw=True)',
        'sys.stdout.buffer.write(b"caf\\xc3"); sys.stdout.flush()',  # half a character...
        'sys.stdout.buffer.write(b"\\xa9\\n"); sys.stdout.flush()',  # ...and the rest
        'print("oops", file=sys.stderr)',
        "6 * 7",
    ])
    events = []
    ex = client.run(code, on_stdout=lambda t: events.append(("stdout", t)),
                    on_stderr=lambda t: events.append(("stderr", t)),
                    on_result=lambda r: events.append(("result", r)))
    assert ex.ok, ex
    kinds = [kind for kind, _ in events]
    display = next(i for i, (k, r) in enumerate(events) if k == "result" and not r.is_result)
    value = next(i for i, (k, r) in enumerate(events) if k == "result" and r.is_result)
    assert "".join(t for k, t in events[:display] if k == "stdout").startswith("first\n"), events
    assert display < value and kinds.count("result") == 2
    assert all(i < value for i, k in enumerate(kinds) if k in ("stdout", "stderr")), kinds
    assert "".join(t for k, t in events if k == "stdout") == "first\ncafé\n"  # never split into U+FFFD
    assert "".join(t for k, t in events if k == "stderr") == "oops\n"
    assert events[display][1].png == b"\x89PNG-ish" and events[value][1].text == "42"
    assert ex.stdout == "first\ncafé\n" and ex.text == "42"


def test_on_error_gets_the_traceback_before_the_call_returns(client):
    errors = []
    ex = client.run('raise KeyError("k")', on_error=errors.append)
    assert [e.name for e in errors] == ["KeyError"] and ex.error == errors[0]


def test_a_plot_shows_in_a_notebook_through_the_mimebundle(client):
    ex = client.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    assert ex.ok, ex
    pngs = [r.png for r in ex.results if r.png is not None]
    assert pngs and pngs[0].startswith(b"\x89PNG")
    bundle = ex._repr_mimebundle_()
    assert bundle["image/png"].startswith("iVBOR")  # base64 of \x89PNG


def test_many_threads_share_one_client(wardend):
    # 12 runs on 2 warm workers: on a loaded machine one may wait past the
    # server's queue.max_wait_ms and get ResourceExhausted, which retries absorb.
    with warden.Client(retries=5) as client, concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        runs = list(pool.map(lambda i: client.run("print(%d * 2)" % i), range(12)))
    assert [ex.stdout for ex in runs] == ["%d\n" % (i * 2) for i in range(12)]


# ---- sessions and files

def test_a_session_keeps_state_and_files_and_closes_on_exit(client):
    with client.session(language="python", labels={"test": "state"}) as s:
        assert s.id.startswith("s-") and repr(s).startswith("warden.Session('s-")
        assert s.run("x = 41").ok
        assert s.run("x + 1").text == "42"
        assert s.files.write("data.csv", b"a,b\n1,2\n").size == 8
        assert s.files.write("notes/t.txt", "héllo").size == len("héllo".encode())
        s.files.write("from_file.bin", io.BytesIO(bytes(range(256)) * 1000))
        assert s.files.read("data.csv") == b"a,b\n1,2\n"
        assert s.files.read("notes/t.txt").decode() == "héllo"
        assert s.files.read("from_file.bin") == bytes(range(256)) * 1000
        assert s.run("import pandas as pd\nint(pd.read_csv('data.csv')['b'][0])").text == "2"
        listing = {f.path: f for f in s.files.list()}
        assert listing["data.csv"] == warden.FileInfo("data.csv", 8, "file")
        assert listing["notes"].type == "directory"
        assert [f.path for f in s.files.list("notes")] == ["notes/t.txt"]
        info = s.info()
        assert (info.id, info.language, info.state, info.labels) == (s.id, "python", "IDLE", {"test": "state"})
        assert info.execution_count == 3
        assert [i.id for i in client.sessions(labels={"test": "state"})] == [s.id]
    with pytest.raises(warden.NotFound):
        client.attach(s.id)
    assert client.sessions(labels={"test": "state"}) == []


def test_interrupt_stops_the_cell_and_keeps_the_state(client):
    with client.session() as s:
        s.run("kept = 'yes'")
        started, on_stdout = started_event()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(s.run, "import time\nprint('started', flush=True)\ntime.sleep(120)",
                                  on_stdout=on_stdout)
            assert started.wait(WAIT_S), "the cell never started"
            assert s.info().state == "BUSY"
            assert s.interrupt() is True
            ex = running.result(timeout=WAIT_S)
        assert ex.outcome == "INTERRUPTED" and ex.error.name == "KeyboardInterrupt", ex
        assert s.run("kept").text == "'yes'"
        assert s.interrupt() is False  # nothing running


def test_restart_keeps_files_unless_asked_not_to(client):
    with client.session() as s:
        s.run("v = 1\nopen('keep.txt', 'w').write('k')")
        info = s.restart(keep_files=True)
        assert info.execution_count == 0 and info.state == "IDLE"
        assert s.run("v").error.name == "NameError"
        assert s.files.read("keep.txt") == b"k"
        s.restart(keep_files=False)
        with pytest.raises(warden.NotFound):
            s.files.read("keep.txt")


def test_fork_and_snapshot_copy_a_sessions_state(client):
    with client.session() as s:
        s.run("v = [1]\nopen('f.txt', 'w').write('x')")
        with s.fork() as forked:
            assert forked.id != s.id and forked.left_out == {}
            forked.run("v.append(2)")
            assert forked.run("v").text == "[1, 2]"
        assert s.run("v").text == "[1]"
        saved = s.snapshot()
        assert saved["complete"] and saved["left_out"] == {}
        with client.restore_snapshot(saved["id"]) as restored:
            assert restored.run("(v, open('f.txt').read())").text == "([1], 'x')"


def test_a_session_used_from_two_clients_at_once(wardend):
    with warden.Client() as a, warden.Client() as b:
        with a.session() as s:
            other = b.attach(s.id)
            assert (other.id, other.language) == (s.id, "python")
            started, on_stdout = started_event()
            # A write makes the file, then fills it (as envd's does): the
            # cell waits for its content, not for its name (beside two CPU
            # hogs it once read the file between the two).
            waiting = ("import os, time\nprint('started', flush=True)\n"
                       "for _ in range(6000):\n    if os.path.exists('go') and os.path.getsize('go'): break\n    time.sleep(0.01)\n"
                       "got = open('go').read()\ngot")
            with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
                running = pool.submit(s.run, waiting, on_stdout=on_stdout)
                assert started.wait(WAIT_S)
                other.files.write("go", "from b")     # while a's cell runs
                after = other.run("got + '!'")        # queued behind a's cell
                first = running.result(timeout=WAIT_S)
            assert first.ok and first.text == "'from b'", first
            assert after.ok and after.text == "'from b!'", after
            assert after.execution_count == first.execution_count + 1
        with pytest.raises(warden.NotFound):  # a closed it; b sees that
            other.run("1")


# ---- errors

def test_grpc_errors_are_warden_errors_with_clear_messages(client, wardend):
    with pytest.raises(warden.NotFound, match="s-000000000000000000000000") as raised:
        client.attach("s-000000000000000000000000")
    assert raised.value.code == "NOT_FOUND" and isinstance(raised.value, warden.WardenError)
    with pytest.raises(warden.InvalidArgument, match="wall_ms"):
        client.run("1", timeout=10 ** 6)
    with pytest.raises(warden.InvalidArgument, match="use python, javascript, bash, typescript, r or java"):
        client.run("1", language="cobol")
    with warden.Client(token="not-a-token-the-daemon-knows") as stranger:
        with pytest.raises(warden.Unauthenticated, match="WARDEN_TOKEN"):
            stranger.run("1")
    with warden.Client("unix:%s.nothing-here" % wardend.socket) as nowhere:
        with pytest.raises(warden.Unavailable, match="is wardend running"):
            nowhere.run("1")
    with warden.Client(timeout=1) as impatient:
        with pytest.raises(warden.DeadlineExceeded):
            impatient.run("import time; time.sleep(120)")


def test_a_symlink_in_the_workspace_is_permission_denied(client):
    with client.session() as s:
        assert s.run("import os; os.symlink('/etc/passwd', 'link')").ok
        with pytest.raises(warden.PermissionDenied):
            s.files.read("link")


def test_a_quota_is_resource_exhausted_and_opt_in_retries_get_through(wardend):
    with warden.Client(token=TOKEN_QUOTA) as quota:
        held = [quota.session("bash") for _ in range(QUOTA_SESSIONS)]
        try:
            with pytest.raises(warden.ResourceExhausted, match="close some first") as raised:
                quota.session("bash")
            assert raised.value.retry_after is None  # this one has no hint

            tries = []
            policy = warden.RetryPolicy(attempts=3, initial_backoff=0.01, on_retry=lambda e, n, d: tries.append(n))
            with warden.Client(token=TOKEN_QUOTA, retries=policy) as patient:
                with pytest.raises(warden.ResourceExhausted):
                    patient.session("bash")
                assert tries == [1, 2]

                def free_one(error, attempt, delay):
                    tries.append(attempt)
                    held.pop().close()
                tries.clear()
                policy.on_retry = free_one
                patient.session("bash").close()  # got through once one was freed
                assert tries == [1]
        finally:
            for s in held:
                s.close()


# ---- the agent

def test_agent_streams_its_events_in_order(client, model):
    model.script([tool_step("print(6 * 7)", "Let me compute."), text_step("It is 42.")])
    events = list(client.agent("What is 6 * 7?", mode="solve"))
    kinds = [e.kind for e in events]
    assert kinds[-1] == "final" and "execution" in kinds and "message" in kinds, kinds
    assert kinds.index("delta") < kinds.index("message") < kinds.index("execution")
    execution = next(e for e in events if e.kind == "execution")
    assert execution.execution.ok and execution.execution.stdout == "42\n" and execution.code == "print(6 * 7)"
    final = events[-1]
    assert (final.answer, final.stop_reason, final.all_succeeded) == ("It is 42.", "DONE", True)
    assert "final" in repr(final)


def test_agent_calls_client_functions_here(client, model):
    model.script([{"content": "", "tool_calls": [{"name": "lookup", "arguments": json.dumps({"key": "a"})}]},
                  tool_step("print('a is', 1)"), text_step("a is 1")])
    calls = []

    def lookup(key: str) -> dict:
        """Looks a key up in the caller's table."""
        calls.append(key)
        return {"value": 1}

    events = list(client.agent("look a up", functions=[lookup]))
    assert calls == ["a"]
    assert [e.name for e in events if e.kind == "function_call"] == ["lookup"]
    assert events[-1].answer == "a is 1", (events, events[-1].stop_detail)
    sent = model.requests()
    assert sent[0]["body"]["tools"] and any(t["function"]["name"] == "lookup" for t in sent[0]["body"]["tools"])
    assert sent[1]["body"]["messages"][-1]["content"] == '{"value": 1}'


def test_agent_refuses_a_bad_request_with_a_warden_error(client, model):
    model.script([])
    with pytest.raises(warden.InvalidArgument):
        list(client.agent("x", max_iterations=10 ** 6))


# ---- network (docs/api.md "Network"; egress is off on this daemon)

def test_a_sessions_network_policy_is_kept_and_shown_without_secrets(client):
    network = warden.Network(allow=["pypi.org", "*.pythonhosted.org:443"], deny=["10.0.0.0/8"],
                             secrets=[warden.Secret("API_KEY", "sk-test-never-shown", ["api.example.com"])],
                             headers={"api.example.com": {"X-Org": "org-never-shown"}})
    with client.session(network=network) as s:
        info = s.info()
        assert info.network.allow == ("pypi.org", "*.pythonhosted.org:443")
        assert info.network.deny == ("10.0.0.0/8",)
        assert info.network.secrets == (warden.Secret("API_KEY", "(hidden)", ("api.example.com",)),)
        assert info.network.headers == {"api.example.com": {"X-Org": "(hidden)"}}
        assert "never-shown" not in repr(info)
        assert len(info.traffic_token) >= 32
        # The sandbox holds the placeholder; its way out answers at once why
        # there is no network here.
        out = s.run("import os, urllib.request\nprint(os.environ['API_KEY'])\n"
                    "try:\n    urllib.request.urlopen('https://pypi.org/simple/', timeout=20)\n"
                    "except Exception as e:\n    print(e)\n")
        assert "warden-secret-API_KEY" in out.stdout
        assert "egress is off on this wardend" in out.stdout, out.stdout
        assert s.update_network(None).network is None
    with pytest.raises(warden.InvalidArgument, match=r"network.allow\[0\]"):
        client.session(network=warden.Network(allow=["not a host"]))


# ---- templates and volumes (docs/templates.md)

def test_a_template_is_imported_used_by_name_and_removed(client, tmp_path):
    bash_image(tmp_path / "tiny.tar")
    progress = []
    imported = client.import_template(tmp_path / "tiny.tar", "pytiny", on_progress=progress.append)
    assert progress and all(isinstance(line, str) and line for line in progress)
    assert (imported.name, imported.public, imported.source_ref) == ("pytiny", False, "tiny")
    assert imported.digest.startswith("sha256:") and len(imported.layers) == 1
    assert "GREETING=hello from the image" in imported.env
    assert imported.language("bash").available and imported.language("bash").interpreter == "/bin/bash"
    assert not imported.language("python").available
    assert "has no python3" in imported.language("python").note
    assert [t.name for t in client.templates() if t.name == "pytiny"] == ["pytiny"]
    assert client.template("pytiny") == imported

    ex = client.run('echo $GREETING; echo "$(</etc/image-release)"', language="bash", template="pytiny")
    assert (ex.outcome, ex.stdout) == ("OK", "hello from the image\nmade by test_client\n"), ex
    with client.session("bash", template="pytiny") as s:
        info = s.info()
        assert (info.template, info.template_digest) == ("pytiny", imported.digest)
        assert s.run("test -e /etc/image-release && echo $GREETING").stdout == "hello from the image\n"
    with pytest.raises(warden.FailedPrecondition, match="'pytiny' has no python3"):
        client.run("1", template="pytiny")
    with pytest.raises(warden.NotFound, match="no-such-template"):
        client.session(template="no-such-template")
    with pytest.raises(warden.InvalidArgument, match="cannot read the image archive"):
        client.import_template(tmp_path / "missing.tar", "nothing")

    client.delete_template("pytiny")
    assert "pytiny" not in [t.name for t in client.templates()]
    with pytest.raises(warden.NotFound):
        client.template("pytiny")


def test_a_volume_keeps_files_between_sessions_that_share_it(client):
    volume = client.create_volume("pydata", max_bytes=32 << 20, max_files=1000)
    try:
        info = volume.info()
        assert (info.name, info.max_bytes, info.max_files, info.mounts) == ("pydata", 32 << 20, 1000, 0)
        entry = volume.write("in/hello.txt", "hello volume")
        assert (entry.path, entry.type, entry.size, entry.mode, entry.uid) == ("in/hello.txt", "file", 12, 0o644, 1000)
        big = bytes(range(256)) * 1000
        assert volume.write("big.bin", io.BytesIO(big), mode=0o600).size == len(big)
        assert volume.read("big.bin") == big and volume.stat("big.bin").mode == 0o600
        assert volume.mkdir("out").type == "directory"
        assert sorted(e.path for e in volume.list(depth=2)) == ["big.bin", "in", "in/hello.txt", "out"]

        with client.session(volumes={"/mnt/data": volume}) as writer, \
                client.session(volumes=[warden.VolumeMount("pydata", "/mnt/ro", read_only=True)]) as reader:
            assert writer.info().volumes == [warden.VolumeMount("pydata", "/mnt/data", False)]
            assert writer.run("open('/mnt/data/in/hello.txt').read()").text == "'hello volume'"
            assert writer.run("import os; open('/mnt/data/out/r.txt', 'w').write('from a session');"
                              "os.symlink('/etc/passwd', '/mnt/data/link')").ok
            assert reader.run("open('/mnt/ro/out/r.txt').read()").text == "'from a session'"
            refused = reader.run("open('/mnt/ro/x', 'w')")
            assert refused.error is not None and "Read-only file system" in refused.error.value, refused
            assert client.get_volume("pydata").mounts == 2
            with pytest.raises(warden.FailedPrecondition):
                volume.delete()

        assert volume.read("out/r.txt") == b"from a session"  # kept after both ended
        with pytest.raises(warden.InvalidArgument, match="is a symlink"):
            volume.read("link")  # a symlink a sandbox planted is never followed
        volume.remove("out")
        assert not volume.exists("out") and volume.exists("in/hello.txt")
        assert "pydata" in [v.name for v in client.volumes()]
    finally:
        volume.delete()
    with pytest.raises(warden.NotFound):
        client.volume("pydata")
