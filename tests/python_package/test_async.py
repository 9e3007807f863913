"""warden.AsyncClient against a real wardend: the same methods as
coroutines, async callbacks in order, async iterators, and many calls from
one event loop."""
import asyncio
import io

import pytest

import warden
from conftest import bash_image, text_step, tool_step

WAIT_S = 60


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, WAIT_S * 2))


def test_run_and_callbacks_as_coroutines(wardend):
    async def main():
        async with warden.AsyncClient() as client:
            ex = await client.run('print("hi")\n6 * 7')
            assert ex.ok and (ex.stdout, ex.text) == ("hi\n", "42"), ex
            events = []

            async def on_stdout(text):  # a coroutine callback is awaited
                events.append(("stdout", text))
            failed = await client.run('import sys\nprint("a", flush=True)\nprint("b", file=sys.stderr)\n1/0',
                                      on_stdout=on_stdout, on_stderr=lambda t: events.append(("stderr", t)),
                                      on_error=lambda e: events.append(("error", e.name)))
            assert failed.outcome == "ERROR"
            assert events[-1] == ("error", "ZeroDivisionError")
            assert "".join(t for k, t in events if k == "stdout") == "a\n", events
            assert "".join(t for k, t in events if k == "stderr") == "b\n", events
            js = await client.run("console.log(1 + 1)", language="javascript")
            assert js.stdout == "2\n"
    run(main())


def test_many_calls_from_one_event_loop(wardend):
    async def main():
        async with warden.AsyncClient(retries=5) as client:  # as with threads: a busy queue is retried
            runs = await asyncio.gather(*(client.run("print(%d)" % i) for i in range(12)))
            assert [ex.stdout for ex in runs] == ["%d\n" % i for i in range(12)]
            async with client.session() as a, client.session() as b:
                results = await asyncio.gather(a.run("n = 'a'"), b.run("n = 'b'"))
                assert all(ex.ok for ex in results)
                assert [(await a.run("n")).text, (await b.run("n")).text] == ["'a'", "'b'"]
    run(main())


def test_sessions_files_interrupt_restart_and_attach(wardend):
    async def main():
        async with warden.AsyncClient() as client:
            async with client.session(labels={"test": "async"}) as s:
                assert (await s.run("x = 41")).ok
                assert (await s.run("x + 1")).text == "42"
                await s.files.write("a.txt", "é")
                await s.files.write("b.bin", io.BytesIO(b"\x00\xff"))
                assert await s.files.read("a.txt") == "é".encode()
                assert await s.files.read("b.bin") == b"\x00\xff"
                assert {f.path for f in await s.files.list()} >= {"a.txt", "b.bin"}
                assert [i.id for i in await client.sessions(labels={"test": "async"})] == [s.id]

                other = await client.attach(s.id)
                started = asyncio.Event()
                running = asyncio.ensure_future(other.run(
                    "import time\nprint('started', flush=True)\ntime.sleep(120)",
                    on_stdout=lambda t: started.set()))
                await asyncio.wait_for(started.wait(), WAIT_S)
                assert await s.interrupt() is True
                assert (await running).outcome == "INTERRUPTED"

                info = await s.restart(keep_files=True)
                assert info.execution_count == 0
                assert (await s.run("x")).error.name == "NameError"
                assert await s.files.read("a.txt") == "é".encode()
            with pytest.raises(warden.NotFound):
                await client.attach(s.id)
            plain = await client.session("bash")  # awaited instead of `async with`
            assert (await plain.run("echo $((6 * 7))")).stdout == "42\n"
            await plain.close()
            with pytest.raises(warden.NotFound):
                await plain.info()
    run(main())


def test_errors_are_the_same_exceptions(wardend):
    async def main():
        async with warden.AsyncClient() as client:
            with pytest.raises(warden.NotFound):
                await client.get_session("s-000000000000000000000000")
            with pytest.raises(warden.InvalidArgument, match="wall_ms"):
                await client.run("1", timeout=10 ** 6)
        async with warden.AsyncClient(token="not-a-token-the-daemon-knows") as stranger:
            with pytest.raises(warden.Unauthenticated):
                await stranger.run("1")
    run(main())


def test_agent_events_as_an_async_iterator_with_async_functions(wardend, model):
    model.script([{"content": "", "tool_calls": [{"name": "double", "arguments": '{"n": 21}'}]},
                  tool_step("print(21 * 2)"), text_step("42")])

    async def double(n: int) -> int:
        """Doubles n."""
        return n * 2

    async def main():
        async with warden.AsyncClient() as client:
            return [e async for e in client.agent("double 21", functions=[double])]
    events = run(main())
    kinds = [e.kind for e in events]
    assert kinds[-1] == "final" and "function_call" in kinds and "execution" in kinds, kinds
    assert events[-1].answer == "42"
    assert model.requests()[1]["body"]["messages"][-1]["content"] == "42"


def test_a_volume_and_templates_as_coroutines(wardend, tmp_path):
    bash_image(tmp_path / "tiny.tar")

    async def main():
        async with warden.AsyncClient() as client:
            progress = []

            async def on_progress(line):
                progress.append(line)
            with open(tmp_path / "tiny.tar", "rb") as archive:  # a file object, read as it is sent
                imported = await client.import_template(archive, "pyasync", on_progress=on_progress)
            assert progress and imported.language("bash").available
            assert (await client.template("pyasync")).digest == imported.digest
            ex = await client.run("echo $GREETING", language="bash", template="pyasync")
            assert ex.stdout == "hello from the image\n", ex
            await client.delete_template("pyasync")

            volume = await client.create_volume("pyasync", max_bytes=16 << 20)
            try:
                await volume.write("a/b.txt", io.BytesIO(b"from a file object"))
                assert await volume.read("a/b.txt") == b"from a file object"
                assert sorted(e.path for e in await volume.list(depth=2)) == ["a", "a/b.txt"]
                assert (await volume.stat("a")).type == "directory" and not await volume.exists("c")
                async with client.session("bash", volumes={"/mnt/v": volume}) as s:
                    assert (await s.run("cat /mnt/v/a/b.txt")).stdout == "from a file object"
                assert [v.mounts for v in await client.volumes() if v.name == "pyasync"] == [0]
            finally:
                await volume.delete()
            with pytest.raises(warden.NotFound):
                await client.volume("pyasync")
            assert "pyasync" not in [t.name for t in await client.templates()]
            with pytest.raises(warden.NotFound, match="pyasync"):
                await client.template("pyasync")
    run(main())
