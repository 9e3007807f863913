"""The unmodified E2B Python SDKs (e2b-code-interpreter and e2b) against
Warden's E2B front, configured as a user would: only E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY (the e2b_env fixture). The behaviours of
tests/e2b/e2b_sdk_test.mjs (the JavaScript SDKs), in Python, sync and async."""
import asyncio

import pytest
from e2b import CommandExitException, TimeoutException
from e2b_code_interpreter import AsyncSandbox, Sandbox


@pytest.fixture
def sandbox(e2b_env):
    sbx = Sandbox.create()
    yield sbx
    sbx.kill()


def test_run_code_keeps_state_and_reports_values_plots_and_errors(sandbox):
    sandbox.run_code("x = 41")
    value = sandbox.run_code("x + 1")
    assert value.text == "42" and value.results[0].is_main_result and value.execution_count == 2
    plot = sandbox.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    [png] = [r.png for r in plot.results if r.png]
    import base64
    assert base64.b64decode(png)[1:4] == b"PNG"
    failed = sandbox.run_code("1 / 0")
    assert (failed.error.name, failed.error.value) == ("ZeroDivisionError", "division by zero")
    assert "ZeroDivisionError" in failed.error.traceback


def test_streaming_callbacks_see_output_as_it_comes(sandbox):
    out, err, results = [], [], []
    sandbox.run_code('import sys\nprint("a")\nprint("b", file=sys.stderr)\n7',
                     on_stdout=lambda m: out.append(m.line), on_stderr=lambda m: err.append(m.line),
                     on_result=lambda r: results.append(r.text))
    assert ("".join(out), "".join(err), results) == ("a\n", "b\n", ["7"])


def test_contexts_in_two_languages_share_the_files(sandbox):
    sandbox.run_code("open('/home/user/shared.txt', 'w').write('from python')")
    js = sandbox.create_code_context(language="js")
    read = sandbox.run_code("require('fs').readFileSync('shared.txt', 'utf8')", context=js)
    assert "from python" in read.text
    assert sandbox.run_code("1 + 1", language="javascript").text == "2"
    assert any(c.id == js.id for c in sandbox.list_code_contexts())
    sandbox.restart_code_context(js)
    sandbox.remove_code_context(js)


def test_files_written_and_read_through_the_sdk_are_the_code_s_files(sandbox):
    sandbox.files.write("/home/user/in.txt", "hello")
    # A string result comes unquoted, as from E2B's server (its Result model strips the repr's quotes).
    assert sandbox.run_code("open('in.txt').read().upper()").text == "HELLO"
    sandbox.run_code("open('out.bin', 'wb').write(bytes(range(256)))")
    data = sandbox.files.read("/home/user/out.bin", format="bytes")
    assert len(data) == 256 and data[255] == 255


def test_kill_connect_set_timeout_and_list_follow_e2b(e2b_env):
    sbx = Sandbox.create(timeout=60, metadata={"owner": "test"})
    sbx.set_timeout(120)
    assert any(s.sandbox_id == sbx.sandbox_id for s in Sandbox.list().next_items())
    again = Sandbox.connect(sbx.sandbox_id)
    assert again.run_code("6 * 7").text == "42"
    sbx.kill()
    # Asked with its own token after the kill, it is gone as on E2B (502).
    assert sbx.is_running() is False
    with pytest.raises(TimeoutException, match="not running"):
        sbx.run_code("1")


def test_what_warden_does_not_do_is_refused_with_a_clear_error(e2b_env):
    # A template Warden has not imported (docs/templates.md): the error says how to make one.
    with pytest.raises(Exception, match=r"there is no template 'my-template' \(there are none yet: warden template import\)"):
        Sandbox.create("my-template")


def test_internet_access_never_bypasses_the_egress_proxy(e2b_env):
    sbx = Sandbox.create(allow_internet_access=True)
    try:
        tried = sbx.run_code("import socket\ntry:\n  socket.create_connection(('1.1.1.1', 80), timeout=5)\n"
                             "except OSError as e:\n  print(type(e).__name__)")
        assert tried.logs.stdout == ["OSError\n"], tried
    finally:
        sbx.kill()


def test_commands_stream_output_and_report_exit_codes(sandbox):
    out, err = [], []
    done = sandbox.commands.run("echo one; echo two >&2; echo three", on_stdout=out.append, on_stderr=err.append)
    assert (done.exit_code, done.stdout, done.stderr) == (0, "one\nthree\n", "two\n")
    assert ("".join(out), "".join(err)) == ("one\nthree\n", "two\n")
    env = sandbox.commands.run('echo "$GREETING $(pwd)"', envs={"GREETING": "hi"})
    assert env.stdout == "hi /home/user\n"
    with pytest.raises(CommandExitException) as failed:
        sandbox.commands.run("echo bad >&2; exit 3")
    assert (failed.value.exit_code, failed.value.stderr) == (3, "bad\n")
    with pytest.raises(TimeoutException):
        sandbox.commands.run("sleep 30", timeout=1)


def test_background_commands_are_listed_fed_stdin_and_killed(sandbox):
    echo = sandbox.commands.run("read line; echo \"got:$line\"", background=True, stdin=True)
    sandbox.commands.send_stdin(echo.pid, "hello\n")
    assert echo.wait().stdout == "got:hello\n"
    sleeper = sandbox.commands.run("sleep 600", background=True, timeout=0)
    assert any(p.pid == sleeper.pid and "sleep 600" in " ".join(p.args) for p in sandbox.commands.list())
    assert sleeper.kill() is True
    with pytest.raises(CommandExitException):
        sleeper.wait()
    assert not any(p.pid == sleeper.pid for p in sandbox.commands.list())
    assert sandbox.commands.kill(987654) is False


def test_run_code_and_commands_share_the_files_which_files_manages(sandbox):
    sandbox.run_code("open('from_code.txt', 'w').write('x' * 10)")
    assert "from_code.txt" in sandbox.commands.run("ls").stdout
    assert sandbox.files.make_dir("/home/user/dir/sub") is True
    assert sandbox.files.make_dir("/home/user/dir/sub") is False
    sandbox.files.write("/home/user/dir/sub/a.txt", "abc")
    assert sandbox.files.exists("/home/user/dir/sub/a.txt") and not sandbox.files.exists("/home/user/nope.txt")
    info = sandbox.files.get_info("/home/user/from_code.txt")
    assert (info.name, info.type.value, info.path, info.size) == ("from_code.txt", "file", "/home/user/from_code.txt", 10)
    names = sorted(e.name for e in sandbox.files.list("/home/user") if not e.name.startswith("."))
    assert names == ["dir", "from_code.txt"]
    deep = sorted(e.path for e in sandbox.files.list("/home/user/dir", depth=2))
    assert deep == ["/home/user/dir/sub", "/home/user/dir/sub/a.txt"]
    moved = sandbox.files.rename("/home/user/dir/sub/a.txt", "/home/user/b.txt")
    assert moved.path == "/home/user/b.txt" and sandbox.files.read("/home/user/b.txt") == "abc"
    sandbox.files.remove("/home/user/dir")
    assert not sandbox.files.exists("/home/user/dir")
    assert sandbox.commands.run("ls").stdout == "b.txt\nfrom_code.txt\n"
    # One machine: anywhere its user may write, and read-only where it may not.
    sandbox.commands.run("echo from-a-command > /tmp/shared.txt")
    assert sandbox.files.read("/tmp/shared.txt") == "from-a-command\n"
    assert any(e.name == "passwd" for e in sandbox.files.list("/etc"))
    with pytest.raises(Exception, match="ermission denied|ead-only"):
        sandbox.files.write("/etc/planted", "no")


def test_the_async_sdk(e2b_env):
    async def main():
        sbx = await AsyncSandbox.create()
        try:
            await sbx.run_code("y = 5")
            assert (await sbx.run_code("y * 2")).text == "10"
            await sbx.files.write("/home/user/a.txt", "async")
            assert (await sbx.commands.run("cat a.txt")).stdout == "async"
        finally:
            await sbx.kill()
    asyncio.run(main())
