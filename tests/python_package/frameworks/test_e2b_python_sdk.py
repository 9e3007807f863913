"""What the unmodified Python SDKs (e2b 2.63.0, e2b-code-interpreter 2.11.5)
meet that the JavaScript ones do not (issue #32): listing with E2B's whole
query, the polled directory watcher, the control plane's statuses and bodies
as E2B's OpenAPI spec names them (read from the SDK's generated client), a
sandbox killed under a running call, set_timeout(0), relative working
directories, killing an ended command, `python`, IPython's display
machinery, and R's and Java's output a line at a time. Each behaviour is a
test of its own, sync and async where the SDK has both, configured only by
E2B's variables (the e2b_env fixture)."""
import asyncio
import datetime
import importlib
import pkgutil
import threading
import time
import uuid

import pytest
from e2b import (AsyncSandbox as AsyncBaseSandbox, FilesystemEventType, NotFoundException, RateLimitException,
                 SandboxException, SandboxNotRunningException, SandboxQuery, SandboxState, TimeoutException)
from e2b_code_interpreter import AsyncSandbox, Sandbox

from conftest import E2B_KEY

DEADLINE_S = 15


def wait_until(predicate, what, deadline_s=DEADLINE_S):
    """Polls `predicate` until it is true or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


async def await_until(predicate, what, deadline_s=DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture(scope="module")
def shared(wardend):
    """One sandbox for the tests that only run things in it."""
    mp = pytest.MonkeyPatch()
    mp.setenv("E2B_API_URL", wardend.http_url)
    mp.setenv("E2B_SANDBOX_URL", wardend.http_url)
    mp.setenv("E2B_API_KEY", E2B_KEY)
    sbx = Sandbox.create()
    yield sbx
    sbx.kill()
    mp.undo()


@pytest.fixture
def sandbox(shared, e2b_env):
    return shared


# ---------------------------------------------------------------------------
# GET /v2/sandboxes: E2B's whole query


def listed(query=None, **kwargs):
    """Every page of Sandbox.list, as ids."""
    paginator = Sandbox.list(query=query, **kwargs)
    ids = []
    while paginator.has_next:
        ids += [s.sandbox_id for s in paginator.next_items()]
    return ids


def test_list_filters_by_metadata_state_start_and_template(e2b_env):
    suite = uuid.uuid4().hex
    a = Sandbox.create(metadata={"suite": suite, "role": "a"})
    b = Sandbox.create(metadata={"suite": suite, "role": "b"})
    c = Sandbox.create(metadata={"suite": suite, "role": "c"})
    try:
        b.pause()
        mine = SandboxQuery(metadata={"suite": suite})
        assert listed(mine) == [c.sandbox_id, b.sandbox_id, a.sandbox_id]  # newest first
        assert listed(mine, order="asc") == [a.sandbox_id, b.sandbox_id, c.sandbox_id]
        assert listed(SandboxQuery(metadata={"suite": suite, "role": "a"})) == [a.sandbox_id]
        assert listed(SandboxQuery(metadata={"suite": suite, "role": "nobody"})) == []
        assert listed(SandboxQuery(metadata={"suite": suite}, state=[SandboxState.PAUSED])) == [b.sandbox_id]
        assert listed(SandboxQuery(metadata={"suite": suite}, state=[SandboxState.RUNNING])) == \
            [c.sandbox_id, a.sandbox_id]
        started_b = b.get_info().started_at
        assert listed(SandboxQuery(metadata={"suite": suite}, started_after=started_b)) == \
            [c.sandbox_id, b.sandbox_id]  # at or after
        assert listed(SandboxQuery(metadata={"suite": suite}, template="code-interpreter-v1")) == \
            [c.sandbox_id, b.sandbox_id, a.sandbox_id]
        assert listed(SandboxQuery(metadata={"suite": suite}, template="someone-elses")) == []
        [info] = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}, state=[SandboxState.PAUSED])).next_items()
        assert (info.state, info.metadata["role"]) == (SandboxState.PAUSED, "b")
        with pytest.raises(SandboxException, match="tag"):
            Sandbox.list(query=SandboxQuery(template="code-interpreter-v1:v2")).next_items()
    finally:
        for s in (a, b, c):
            s.kill()


def test_list_pages_stay_stable_while_sandboxes_come_and_go(e2b_env):
    suite = uuid.uuid4().hex
    made = [Sandbox.create(metadata={"suite": suite}) for _ in range(3)]
    later = None
    try:
        paginator = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=1)
        seen = paginator.next_items()
        assert [s.sandbox_id for s in seen] == [made[2].sandbox_id]
        assert paginator.has_next and paginator.next_token  # the X-Next-Token header
        # Meanwhile one of those not yet listed ends and a new one starts.
        made[1].kill()
        later = Sandbox.create(metadata={"suite": suite})
        while paginator.has_next:
            seen += paginator.next_items()
        assert [s.sandbox_id for s in seen] == [made[2].sandbox_id, made[0].sandbox_id]
        # The token resumes the walk elsewhere, as the SDK lets one.
        again = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=2)
        assert [s.sandbox_id for s in again.next_items()] == [later.sandbox_id, made[2].sandbox_id]
        resumed = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=2, next_token=again.next_token)
        assert [s.sandbox_id for s in resumed.next_items()] == [made[0].sandbox_id]
        assert not resumed.has_next
    finally:
        for s in made + [later]:
            if s is not None:
                s.kill()


def test_the_async_sdk_lists_with_the_same_query(e2b_env):
    async def main():
        suite = uuid.uuid4().hex
        a = await AsyncSandbox.create(metadata={"suite": suite})
        b = await AsyncSandbox.create(metadata={"suite": suite})
        try:
            paginator = AsyncSandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=1, order="asc")
            ids = []
            while paginator.has_next:
                ids += [s.sandbox_id for s in await paginator.next_items()]
            assert ids == [a.sandbox_id, b.sandbox_id]
            running = AsyncSandbox.list(query=SandboxQuery(metadata={"suite": suite}, state=[SandboxState.PAUSED]))
            assert await running.next_items() == []
        finally:
            await a.kill()
            await b.kill()
    asyncio.run(main())


# ---------------------------------------------------------------------------
# The control plane against E2B's OpenAPI spec, as the SDK's generated
# client has it: a status the spec does not name for the route raises
# UnexpectedStatus, and a body missing what the spec requires fails the
# model's from_dict.

# Routes of the generated client Warden does not serve, and why. A route
# that appears in a new SDK fails the walk until it is served or listed.
NOT_SERVED = {
    "put_sandboxes_sandbox_id_network": "network rules (issue 30, 'Network on purpose')",
}


def test_every_control_plane_route_answers_as_the_spec_says(e2b_env):
    from e2b.api.client import errors
    from e2b.api.client.api import sandboxes as sandbox_routes, snapshots as snapshot_routes
    from e2b.api.client.api.templates import delete_templates_template_id
    from e2b.api.client.models import (ConnectSandbox, ConnectSandboxV2, Error, NewSandbox, NewSandboxV2,
                                       ResumedSandbox, SandboxForkRequest, SandboxPauseRequest,
                                       SandboxRefreshRequest, SandboxSnapshotRequest, SandboxTimeoutRequest)
    from e2b.api.client_sync import get_api_client
    from e2b.connection_config import ConnectionConfig

    client = get_api_client(ConnectionConfig(), raise_on_unexpected_status=True)
    route = {name: importlib.import_module("%s.%s" % (package.__name__, name))
             for package in (sandbox_routes, snapshot_routes)
             for _, name, _ in pkgutil.iter_modules(package.__path__)}
    walked = set()

    def call(name, *args, expect, **kwargs):
        """One call through the generated module `name`; its status must be
        `expect`, which the spec names for it (or the client raises)."""
        walked.add(name)
        module = route[name] if name in route else delete_templates_template_id
        try:
            response = module.sync_detailed(*args, client=client, **kwargs)
        except errors.UnexpectedStatus as e:
            raise AssertionError("%s answered %d, which E2B's spec does not name for it: %r" % (
                name, e.status_code, e.content)) from None
        assert response.status_code == expect, (name, response.status_code, response.content)
        if expect < 300 and response.content:
            assert response.parsed is not None and not isinstance(response.parsed, Error), (name, response.content)
        if expect >= 400:
            assert isinstance(response.parsed, Error) and response.parsed.message, (name, response.content)
        return response

    created = call("post_v2_sandboxes", body=NewSandboxV2(template_id="code-interpreter-v1", timeout=60), expect=201)
    sid = created.parsed.sandbox_id
    old = call("post_sandboxes", body=NewSandbox(template_id="code-interpreter-v1", timeout=60), expect=201)
    try:
        assert created.parsed.envd_access_token and created.parsed.envd_version
        call("post_sandboxes", body=NewSandbox(template_id="no-such-template"), expect=400)
        assert call("get_sandboxes_sandbox_id", sid, expect=200).parsed.sandbox_id == sid
        call("get_sandboxes_sandbox_id", "s-000000000000000000000000", expect=404)
        listing = call("get_v2_sandboxes", expect=200, limit=1)
        assert listing.headers.get("x-next-token") and int(listing.headers["x-total-running"]) >= 2
        call("get_v2_sandboxes", expect=400, limit=0)
        call("get_v2_sandboxes", expect=400, next_token="garbage")
        assert sid in [s.sandbox_id for s in call("get_sandboxes", expect=200).parsed]
        metrics = call("get_sandboxes_sandbox_id_metrics", sid, expect=200).parsed
        assert metrics and metrics[0].mem_total > 0
        many = call("get_sandboxes_metrics", sandbox_ids=[sid, old.parsed.sandbox_id], expect=200).parsed
        assert set(many.sandboxes) == {sid, old.parsed.sandbox_id}  # the spec leaves it untyped: a dict by id
        assert many.sandboxes[sid]["memTotal"] > 0
        call("get_sandboxes_metrics", sandbox_ids=[], expect=400)
        assert call("get_sandboxes_sandbox_id_logs", sid, expect=200).parsed.logs == []
        assert call("get_v_2_sandboxes_sandbox_id_logs", sid, expect=200).parsed.logs == []
        call("post_sandboxes_sandbox_id_timeout", sid, body=SandboxTimeoutRequest(timeout=120), expect=204)
        call("post_sandboxes_sandbox_id_timeout", "s-000000000000000000000000",
             body=SandboxTimeoutRequest(timeout=120), expect=404)
        call("post_sandboxes_sandbox_id_refreshes", sid, body=SandboxRefreshRequest(duration=60), expect=204)
        assert call("post_sandboxes_sandbox_id_connect", sid, body=ConnectSandbox(timeout=60), expect=200) \
            .parsed.sandbox_id == sid  # it was running
        call("post_v_2_sandboxes_sandbox_id_connect", sid, body=ConnectSandboxV2(timeout=60), expect=200)
        call("post_sandboxes_sandbox_id_resume", sid, body=ResumedSandbox(), expect=409)  # running already
        snapshot = call("post_sandboxes_sandbox_id_snapshots", sid, body=SandboxSnapshotRequest(), expect=201).parsed
        assert snapshot.snapshot_id in [s.snapshot_id for s in call("get_snapshots", expect=200).parsed]
        call("delete_templates_template_id", snapshot.snapshot_id, expect=204)
        forks = call("post_sandboxes_sandbox_id_fork", sid, body=SandboxForkRequest(count=1, timeout=30),
                     expect=201).parsed
        assert len(forks) == 1 and forks[0].sandbox.sandbox_id not in (sid, "")
        call("delete_sandboxes_sandbox_id", forks[0].sandbox.sandbox_id, expect=204)
        call("post_sandboxes_sandbox_id_fork", "s-000000000000000000000000", body=SandboxForkRequest(), expect=404)
        call("post_sandboxes_sandbox_id_pause", sid, body=SandboxPauseRequest(), expect=204)
        call("post_sandboxes_sandbox_id_pause", sid, body=SandboxPauseRequest(), expect=409)
        resumed = call("post_sandboxes_sandbox_id_connect", sid, body=ConnectSandbox(timeout=60), expect=201)
        assert resumed.parsed.sandbox_id == sid  # resumed: 201
        call("post_sandboxes_sandbox_id_pause", sid, body=SandboxPauseRequest(), expect=204)
        call("post_sandboxes_sandbox_id_resume", sid, body=ResumedSandbox(), expect=201)
        call("delete_sandboxes_sandbox_id", sid, expect=204)
        call("delete_sandboxes_sandbox_id", sid, expect=404)
    finally:
        for s in (sid, old.parsed.sandbox_id):
            delete = route["delete_sandboxes_sandbox_id"].sync_detailed(s, client=get_api_client(ConnectionConfig()))
            assert delete.status_code in (204, 404)
    walked.add("post_sandboxes")
    missing = set(route) - walked - set(NOT_SERVED)
    assert not missing, "routes of E2B's spec neither walked nor listed as not served: %s" % sorted(missing)


def test_fork_answers_201_and_the_forks_run(sandbox, e2b_env):
    sandbox.run_code("forked_value = 41")
    [fork] = sandbox.fork(count=1, timeout=60)
    try:
        assert not isinstance(fork, Exception), fork
        assert fork.run_code("forked_value + 1").text == "42"
    finally:
        fork.kill()


def test_the_async_sdk_forks(sandbox, e2b_env):
    async def main():
        source = await AsyncSandbox.connect(sandbox.sandbox_id)
        forks = await source.fork(count=1, timeout=60)
        assert len(forks) == 1 and not isinstance(forks[0], Exception), forks
        try:
            assert (await forks[0].commands.run("echo forked")).stdout == "forked\n"
        finally:
            await forks[0].kill()
    asyncio.run(main())


# ---------------------------------------------------------------------------
# envd's polled watcher (the synchronous SDK's files.watch_dir)


def events_until(handle, wanted, deadline_s=DEADLINE_S):
    """Polls the handle until every (name, type) of `wanted` came; all events."""
    seen = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        seen += handle.get_new_events()
        if wanted <= {(e.name, e.type) for e in seen}:
            return seen
        time.sleep(0.05)
    raise AssertionError("wanted %s, saw %s" % (wanted, [(e.name, e.type) for e in seen]))


def test_the_sync_sdk_polls_a_recursive_watch_with_entries(sandbox):
    root = "/home/user/watched-%s" % uuid.uuid4().hex[:8]
    sandbox.files.make_dir(root + "/sub")
    handle = sandbox.files.watch_dir(root, recursive=True, include_entry=True)
    try:
        sandbox.files.write(root + "/sub/a.txt", "hello")
        seen = events_until(handle, {("sub/a.txt", FilesystemEventType.CREATE)})
        entry = next(e.entry for e in seen if e.name == "sub/a.txt" and e.entry is not None)
        assert (entry.name, entry.path, entry.type.value) == ("a.txt", root + "/sub/a.txt", "file")
        sandbox.commands.run("mkdir %s/new && echo x > %s/new/b.txt && rm %s/sub/a.txt" % (root, root, root))
        seen = events_until(handle, {("new", FilesystemEventType.CREATE), ("new/b.txt", FilesystemEventType.CREATE),
                                     ("sub/a.txt", FilesystemEventType.REMOVE)})
        assert all(e.entry is None for e in seen if e.type == FilesystemEventType.REMOVE)
    finally:
        handle.stop()
    with pytest.raises(SandboxException, match="already stopped"):
        handle.get_new_events()


def test_the_sync_sdk_watch_without_entries_or_recursion(sandbox):
    root = "/home/user/flat-%s" % uuid.uuid4().hex[:8]
    sandbox.files.make_dir(root + "/deep")
    handle = sandbox.files.watch_dir(root)
    try:
        sandbox.files.write(root + "/deep/hidden.txt", "x")
        sandbox.files.write(root + "/top.txt", "x")
        seen = events_until(handle, {("top.txt", FilesystemEventType.CREATE)})
        assert all(e.entry is None for e in seen)
        assert not any(e.name.startswith("deep/") for e in seen)
    finally:
        handle.stop()
    with pytest.raises(NotFoundException):
        sandbox.files.watch_dir("/home/user/no-such-dir-%s" % uuid.uuid4().hex)


def test_polled_watchers_are_bounded_per_sandbox_and_go_with_it(e2b_env):
    sbx = Sandbox.create()
    handles = []
    try:
        for _ in range(16):
            handles.append(sbx.files.watch_dir("/home/user"))
        with pytest.raises(RateLimitException, match="16 directory watchers"):
            sbx.files.watch_dir("/home/user")
        handles.pop().stop()
        handles.append(sbx.files.watch_dir("/home/user"))  # a stopped one frees its place
        sbx.files.write("/home/user/f.txt", "x")
        events_until(handles[-1], {("f.txt", FilesystemEventType.CREATE)})
    finally:
        sbx.kill()
    with pytest.raises(TimeoutException):
        handles[0].get_new_events()


def test_the_async_sdk_watches_recursively_with_entries(sandbox):
    async def main():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        root = "/home/user/awatched-%s" % uuid.uuid4().hex[:8]
        await sbx.files.make_dir(root + "/sub")
        events = []
        handle = await sbx.files.watch_dir(root, events.append, recursive=True, include_entry=True)
        try:
            await sbx.files.write(root + "/sub/c.txt", "abc")
            await await_until(lambda: asyncio.sleep(0, any(e.name == "sub/c.txt" and e.entry for e in events)),
                              "the event of sub/c.txt")
        finally:
            await handle.stop()
        entry = next(e.entry for e in events if e.name == "sub/c.txt" and e.entry)
        assert (entry.name, entry.path) == ("c.txt", root + "/sub/c.txt")
    asyncio.run(main())


# ---------------------------------------------------------------------------
# A sandbox killed under a running call: both SDKs say it ended


def test_a_command_cut_off_by_the_kill_reports_the_sandbox_gone(e2b_env):
    sbx = Sandbox.create()
    handle = sbx.commands.run("echo started; sleep 60", background=True)
    sbx.kill()
    with pytest.raises(SandboxNotRunningException, match="killed or reached its end of life"):
        handle.wait()


def test_the_async_sdk_reports_a_command_cut_off_by_the_kill(e2b_env):
    async def main():
        sbx = await AsyncSandbox.create()
        handle = await sbx.commands.run("sleep 60", background=True)
        await sbx.kill()
        with pytest.raises(SandboxNotRunningException):
            await handle.wait()
    asyncio.run(main())


def test_a_cell_cut_off_by_the_kill_reports_the_sandbox_killed(e2b_env):
    sbx = Sandbox.create()
    assert sbx.run_code("1").text == "1"
    killer = threading.Timer(1.0, sbx.kill)
    killer.start()
    try:
        with pytest.raises(TimeoutException, match="sandbox was killed"):
            sbx.run_code("import time\ntime.sleep(60)")
    finally:
        killer.join()


# ---------------------------------------------------------------------------
# Smaller differences


def test_set_timeout_zero_ends_the_sandbox_now(e2b_env):
    sbx = Sandbox.create()
    sbx.set_timeout(0)
    wait_until(lambda: not sbx.is_running(), "the sandbox to end")
    with pytest.raises(TimeoutException):
        sbx.commands.run("true")


def test_the_async_sdk_sets_timeout_zero(e2b_env):
    async def main():
        sbx = await AsyncBaseSandbox.create()
        await sbx.set_timeout(0)

        async def ended():
            return not await sbx.is_running()
        await await_until(ended, "the sandbox to end")
    asyncio.run(main())


def test_a_relative_cwd_is_taken_from_the_home(sandbox):
    sandbox.files.make_dir("/home/user/rel/inner")
    assert sandbox.commands.run("pwd", cwd="rel/inner").stdout == "/home/user/rel/inner\n"
    assert sandbox.commands.run("pwd", cwd="~/rel").stdout == "/home/user/rel\n"
    assert sandbox.commands.run("pwd", cwd="./rel/../rel").stdout == "/home/user/rel\n"
    context = sandbox.create_code_context(cwd="rel")
    assert sandbox.run_code("import os; os.getcwd()", context=context).text == "/home/user/rel"


def test_the_async_sdk_takes_a_relative_cwd_from_the_home(sandbox):
    async def main():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        await sbx.files.make_dir("/home/user/arel")
        assert (await sbx.commands.run("pwd", cwd="arel")).stdout == "/home/user/arel\n"
    asyncio.run(main())


def test_killing_an_ended_command_is_false(sandbox):
    handle = sandbox.commands.run("true", background=True)
    assert handle.wait().exit_code == 0
    assert sandbox.commands.kill(handle.pid) is False
    assert handle.kill() is False


def test_the_async_sdk_finds_an_ended_command_gone(sandbox):
    async def main():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        handle = await sbx.commands.run("true", background=True)
        await handle.wait()
        assert await sbx.commands.kill(handle.pid) is False
    asyncio.run(main())


def test_python_is_a_command(sandbox):
    result = sandbox.commands.run("python -c 'import sys; print(sys.version_info[0])'; command -v python")
    assert result.stdout == "3\n/opt/warden/bin/python\n"
    assert sandbox.run_code("!python -c 'print(6 * 7)'").logs.stdout == ["42\n"]


def test_ipython_display_machinery_gives_results(sandbox):
    execution = sandbox.run_code(
        "from IPython.display import display, HTML, Markdown, JSON, display_html\n"
        "display(HTML('<b>bold</b>'))\n"
        "handle = display(Markdown('# Title'), display_id=True)\n"
        "handle.update(Markdown('# Updated'))\n"
        "display_html('<i>raw</i>', raw=True)\n"
        "display({'a': 1}, raw=True)\n"
        "import IPython\n"
        "(IPython.get_ipython(), IPython.__version__.split('.')[0])")
    assert execution.error is None, execution.error
    assert [r.html for r in execution.results if r.html] == ["<b>bold</b>", "<i>raw</i>"]
    assert [r.markdown for r in execution.results if r.markdown] == ["# Title", "# Updated"]
    assert execution.text == "(None, '8')"
    assert not any(r.is_main_result for r in execution.results[:-1])


def test_the_async_sdk_gets_ipython_displays(sandbox):
    async def main():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        execution = await sbx.run_code(
            "from IPython.display import display, Image\n"
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2]); plt.savefig('/tmp/p.png'); plt.close()\n"
            "display(Image(filename='/tmp/p.png'))")
        assert execution.error is None, execution.error
        assert [bool(r.png) for r in execution.results] == [True]
    asyncio.run(main())


def test_r_and_java_output_come_a_line_at_a_time(sandbox):
    r = sandbox.run_code('print("Hello, World!")', language="r")
    assert r.logs.stdout == ['[1] "Hello, World!"\n']
    r = sandbox.run_code('print(1:3)\ncat("a")\ncat("b\\n")\nfor (i in 1:3) print(i)', language="r")
    assert "".join(r.logs.stdout) == "[1] 1 2 3\nab\n[1] 1\n[1] 2\n[1] 3\n"
    assert all(chunk.endswith("\n") for chunk in r.logs.stdout), r.logs.stdout
    java = sandbox.run_code('System.out.println("Hello, World!");', language="java")
    assert java.logs.stdout == ["Hello, World!\n"]
    # One snippet (JShell compiles each statement of a cell apart, and a
    # partial line waits at most 100 ms for the rest of it).
    java = sandbox.run_code('{ System.out.print("a"); System.out.println("b"); System.out.print("tail"); }',
                            language="java")
    assert "".join(java.logs.stdout) == "ab\ntail"
    # No chunk ends inside a line but the last (the partial "tail"); under
    # load "ab\n" and "tail" may be read from the kernel's pipe together.
    assert all(chunk.endswith("\n") for chunk in java.logs.stdout[:-1]), java.logs.stdout


def test_the_async_sdk_gets_r_output_a_line_at_a_time(sandbox):
    async def main():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        execution = await sbx.run_code('print(c(a = 1, b = 2))', language="r")
        # Whole lines only, however R's writes and the pipe cut them.
        assert "".join(execution.logs.stdout) == "a b \n1 2 \n"
        assert all(chunk.endswith("\n") for chunk in execution.logs.stdout), execution.logs.stdout
    asyncio.run(main())
