"""The KV event subscriber's link state: it follows the PUB socket, whatever the replay socket does."""

import asyncio

import pytest
import zmq

from enginetui.vllm_watch import subscriber as sub_mod
from enginetui.vllm_watch.subscriber import KvSubscriber, SubscriberCallbacks


async def test_an_unanswered_replay_leaves_a_connected_link_up(monkeypatch, ipc_dir):
    """A replay socket that never answers (a busy or slow server) says so, but the PUB link the
    monitor saw connect stays up: an idle server sends no batch that would bring it back."""
    monkeypatch.setattr(sub_mod, "REPLAY_TIMEOUT_S", 0.3)
    folder = ipc_dir
    ctx = zmq.Context()
    pub, router = ctx.socket(zmq.PUB), ctx.socket(zmq.ROUTER)  # the ROUTER takes requests and never answers
    pub.bind(f"ipc://{folder}/pub.sock")
    router.bind(f"ipc://{folder}/replay.sock")
    statuses: list[tuple[str, str]] = []
    callbacks = SubscriberCallbacks(
        batch=lambda batch, replayed: None,
        status=lambda status, message: statuses.append((status, message)),
        missed=lambda rank, first, last: None,
        restarted=lambda rank: None,
    )
    sub = KvSubscriber(f"ipc://{folder}/pub.sock", f"ipc://{folder}/replay.sock", 0, callbacks)
    task = asyncio.ensure_future(sub.run())
    try:
        async with asyncio.timeout(30):
            while not any("no answer from the replay socket" in m for _, m in statuses):
                await asyncio.sleep(0.02)
        assert ("up", f"connected to ipc://{folder}/pub.sock") in statuses
        assert statuses[-1][0] == "up"  # the replay's silence did not take the link back to "connecting"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        pub.close(0)
        router.close(0)
        ctx.term()
