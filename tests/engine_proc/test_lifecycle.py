"""EngineCore process lifecycle: start-up errors, death, shutdown, orphans, idle CPU, events off."""

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
import zmq

from enginetui.core.config import EngineConfig
from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.engine.core_client import EngineCoreClient, SyncClient
from enginetui.core.engine.engine_host import EngineProcess
from enginetui.core.engine.errors import EngineDeadError, EngineStartupError
from enginetui.core.engine.llm import LLM
from enginetui.core.engine.processor import Processor
from enginetui.core.sampling_params import SamplingParams
from enginetui.serve.process import wait_gone
from tests.engine_proc.engine_args import engine_args
from tests.support.checkout import checkout_env

pytestmark = pytest.mark.timeout(90)


def _live_children() -> set[int]:
    """Our live descendants, minus multiprocessing's resource tracker (a helper that lives as long as we do)."""
    pids = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline()):
                pids.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


# ---- start-up ------------------------------------------------------------------------------


def test_startup_error_bad_model_path():
    before = _live_children()
    t0 = time.monotonic()
    with pytest.raises(
        EngineStartupError, match=r"ModelLoadError: model path .*enginetui-no-such-model.* does not exist"
    ):
        LLM(model="/nonexistent/enginetui-no-such-model", multiprocess=True, skip_tokenizer_init=True)
    assert time.monotonic() - t0 < 30
    assert isinstance(EngineStartupError("x"), RuntimeError)
    assert _live_children() <= before  # the failed child is gone


def test_startup_child_dies_before_handshake():
    with pytest.raises(EngineStartupError, match=r"exited with code 3 before it was ready"):
        EngineProcess(EngineConfig(), zmq.Context(), command=[sys.executable, "-c", "import os; os._exit(3)"])
    before = _live_children()
    with pytest.raises(EngineStartupError, match=r"did not become ready within 2 s"):
        EngineProcess(
            EngineConfig(),
            zmq.Context(),
            startup_timeout=2.0,
            command=[sys.executable, "-c", "import time; time.sleep(120)"],
        )
    assert _live_children() <= before


# ---- death of the child ---------------------------------------------------------------------


def _kill_later(pid: int, delay: float) -> list[float]:
    killed_at: list[float] = []

    def kill():
        os.kill(pid, signal.SIGKILL)
        killed_at.append(time.monotonic())

    threading.Timer(delay, kill).start()
    return killed_at


def test_sync_client_kill9_raises_engine_dead_quickly(engine_model_dir):
    client = EngineCoreClient.make(
        EngineConfig(**engine_args(engine_model_dir, skip_tokenizer_init=True)), asyncio_mode=False, multiprocess=True
    )
    try:
        pid = client.engine_pid
        client.call("pause")  # get_output() now blocks: nothing will come
        killed_at = _kill_later(pid, 0.3)
        with pytest.raises(
            EngineDeadError, match=rf"EngineCore process \(pid {pid}\) died unexpectedly \(exit code -9\)"
        ):
            client.get_output()
        assert time.monotonic() - killed_at[0] < 1.0
        req, _ = Processor(None, client.info).process("x", [1, 2], SamplingParams(max_tokens=2))
        with pytest.raises(EngineDeadError):
            client.add_request(req)
        with pytest.raises(EngineDeadError):
            client.call("snapshot")
    finally:
        client.shutdown()


async def test_async_kill9_fails_pending_requests_quickly(engine_model_dir):
    llm = AsyncLLM.from_engine_args(multiprocess=True, **engine_args(engine_model_dir))
    try:
        pid = llm.engine_pid
        await llm.pause()
        stream = llm.generate([5, 6, 7], SamplingParams(temperature=0.0, max_tokens=50), "doomed")
        first = asyncio.create_task(stream.__anext__())
        while not (await llm.snapshot()).waiting:  # the request reaches the engine when the stream starts
            await asyncio.sleep(0.01)
        await llm.step_once()
        await asyncio.wait_for(first, 5)
        events = llm.events()
        greeting = await asyncio.wait_for(events.__anext__(), 10)
        assert greeting.is_snapshot
        killed_at = _kill_later(pid, 0.2)
        final = await asyncio.wait_for(stream.__anext__(), 3)
        assert final.finished and final.outputs[0].finish_reason == "error"
        assert "died unexpectedly (exit code -9)" in final.outputs[0].error
        with pytest.raises(EngineDeadError, match=rf"EngineCore process \(pid {pid}\) died unexpectedly"):
            await asyncio.wait_for(stream.__anext__(), 3)
        assert time.monotonic() - killed_at[0] < 1.0
        with pytest.raises(EngineDeadError):
            await asyncio.wait_for(events.__anext__(), 3)
        with pytest.raises(EngineDeadError):
            await llm.snapshot()
        with pytest.raises(EngineDeadError):
            await anext(llm.generate([1, 2], SamplingParams(max_tokens=2), "after"))
    finally:
        llm.shutdown()
        llm.shutdown()


# ---- ending the child -------------------------------------------------------------------------


async def test_events_disabled_and_shutdown(engine_model_dir):
    llm = AsyncLLM.from_engine_args(multiprocess=True, **engine_args(engine_model_dir, enable_step_events=False))
    pid = llm.engine_pid
    got = []

    async def listen():
        async for ev in llm.events():
            got.append(ev)

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0.3)
    outs = [o async for o in llm.generate([5, 6, 7], SamplingParams(temperature=0.0, max_tokens=5), "quiet")]
    assert outs[-1].finished and len(outs[-1].outputs[0].token_ids) == 5
    await llm.pause()
    await llm.step_once()
    await asyncio.sleep(0.3)
    assert got == []  # no greeting, no step events
    snap = await llm.snapshot()  # snapshots are still served on request
    assert snap.is_snapshot and snap.step >= 5
    llm.shutdown()
    await asyncio.wait_for(listener, 3)  # the subscription ends with the engine
    assert wait_gone(pid, 3.0)
    llm.shutdown()  # idempotent
    with pytest.raises(EngineDeadError):
        await anext(llm.generate([1, 2], SamplingParams(max_tokens=2), "late"))


def test_default_client_is_multiprocess_and_gc_ends_child(engine_model_dir, monkeypatch):
    monkeypatch.delenv("ENGINETUI_MULTIPROC", raising=False)
    llm = LLM(**engine_args(engine_model_dir, skip_tokenizer_init=True))
    assert isinstance(llm.engine.client, SyncClient) and llm.engine.client.engine_pid is not None
    pid = llm.engine.client.engine_pid
    assert psutil.Process(pid).is_running()
    del llm
    gc.collect()
    assert wait_gone(pid, 5.0), "EngineCore still alive after its LLM was garbage collected"


PARENT_SCRIPT = textwrap.dedent("""
    import sys, threading, time
    from enginetui.core.engine.llm import LLM
    from enginetui.core.sampling_params import SamplingParams

    if __name__ == "__main__":
        box = []
        # start the engine from a thread that then exits: the child must survive that
        t = threading.Thread(target=lambda: box.append(LLM(model=sys.argv[1], skip_tokenizer_init=True,
                                                           multiprocess=True, num_gpu_blocks_override=16)))
        t.start(); t.join()
        out = box[0].generate([[1, 2, 3]], SamplingParams(max_tokens=2), use_tqdm=False)
        print(box[0].engine.client.engine_pid, len(out[0].outputs[0].token_ids), flush=True)
        print(box[0].engine.client.host.tmpdir, flush=True)
        time.sleep(120)
""")


def test_parent_killed_takes_the_child(engine_model_dir, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT_SCRIPT)
    parent = subprocess.Popen(
        [sys.executable, str(script), engine_model_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=checkout_env(),
    )
    try:
        line = parent.stdout.readline()  # the pytest timeout guards a hang here
        pid_text, n_tokens = line.split()
        ipc_dir = parent.stdout.readline().strip()
        assert os.path.isdir(ipc_dir)
        child = int(pid_text)
        assert n_tokens == "2"
        assert psutil.Process(child).ppid() == parent.pid
        parent.kill()
        parent.wait()
        assert wait_gone(child, 3.0), "EngineCore outlived its killed parent"
        assert not os.path.exists(ipc_dir), "the child left its ipc files behind"
    finally:
        if parent.poll() is None:
            parent.kill()
