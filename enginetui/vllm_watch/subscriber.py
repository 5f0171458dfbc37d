"""Follow one vLLM KV event publisher over ZMQ, in order, catching up through its replay socket.

vLLM's publisher (vllm/distributed/kv_events.py, ZmqEventPublisher) sends each batch on a PUB
socket as (topic, 8-byte sequence number, msgpack payload) and, when started with a
`replay_endpoint`, keeps its last `buffer_steps` batches: a request (an empty frame and the first
sequence number wanted, 8 bytes big-endian) to that ROUTER socket is answered with every buffered
batch from there on, as (empty, topic, sequence, payload), then (empty, "", -1, "").

`KvSubscriber.run()` delivers batches in sequence order and exactly once:
- on start it asks the replay socket for everything it has (the cache's history);
- a jump in the sequence numbers is a gap: the missing batches are asked for again (or reported
  lost when the buffer no longer has them);
- a sequence number that goes back with a newer timestamp is a new publisher (the server
  restarted): its rank's tree starts over, and its history is asked for from 0; an older one is a
  duplicate of a batch already delivered (PUB and replay overlap) and is dropped.
ZMQ reconnects by itself when the server comes back; a socket monitor says whether it is connected.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import zmq
import zmq.asyncio
from zmq.utils.monitor import recv_monitor_message

from enginetui.vllm_watch.kv_events import END_OF_REPLAY, KVEventBatch, KVEventDecodeError, decode_frames

REPLAY_TIMEOUT_S = 3.0  # longest wait for the next replayed batch before the replay counts as unanswered


@dataclass(frozen=True, slots=True)
class SubscriberCallbacks:
    """Where a subscriber reports (all called on the event loop)."""

    batch: Callable[[KVEventBatch, bool], None]  # (batch, replayed) in sequence order
    status: Callable[[str, str], None]  # (connecting | up | down, message)
    missed: Callable[[int, int, int], None]  # (rank, first, last sequence number lost for good)
    restarted: Callable[[int], None]  # (rank): its sequence numbers started over


class KvSubscriber:
    """One publisher (one data-parallel rank): its PUB endpoint and, optionally, its replay endpoint."""

    def __init__(self, endpoint: str, replay_endpoint: str | None, rank: int, report: SubscriberCallbacks) -> None:
        self.endpoint = endpoint  # where vLLM publishes (tcp://HOST:PORT or ipc://PATH)
        self.replay_endpoint = replay_endpoint  # vLLM's replay ROUTER socket (None: no catching up)
        self.rank = rank  # the data-parallel rank this publisher serves (its batches say so too)
        self.report = report  # where batches and news go
        self.expected: int | None = None  # the next sequence number due (None: none delivered yet)
        self.last_ts = 0.0  # vLLM's timestamp of the last batch delivered
        self._resync = False  # the next batch starts a new history (resync())
        self._lock = asyncio.Lock()  # one delivery at a time (live batches and a resync's replay)
        self._resync_task: asyncio.Future | None = None  # the replay a resync() started (kept referenced)
        self.link = "connecting"  # the PUB socket's state, as its monitor last said it
        self._ctx = zmq.asyncio.Context.instance()

    async def run(self) -> None:
        """Deliver batches until cancelled. Raises ValueError for an endpoint ZMQ cannot use."""
        sub = self._ctx.socket(zmq.SUB)
        monitor_task = None
        try:
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            monitor = sub.get_monitor_socket()
            try:
                sub.connect(self.endpoint)
            except zmq.ZMQError as exc:
                raise ValueError(f"cannot use KV events endpoint {self.endpoint!r}: {exc}") from exc
            monitor_task = asyncio.ensure_future(self._watch(monitor))
            self.report.status("connecting", f"connecting to {self.endpoint}")
            if self.replay_endpoint:
                async with self._lock:
                    await self._replay(0)
            while True:
                frames = await sub.recv_multipart()
                try:
                    batch = decode_frames(frames, self.rank)
                except KVEventDecodeError as exc:
                    self.report.status("up", f"a message on {self.endpoint} is not a KV event batch: {exc}")
                    continue
                async with self._lock:
                    await self._deliver(batch)
        finally:
            if monitor_task is not None:
                monitor_task.cancel()
            sub.disable_monitor()
            sub.close(linger=0)

    def resync(self) -> None:
        """The server restarted (its /metrics say so): a new publisher, whose history is asked for
        from the replay socket now (or before the next batch is delivered, if it did not answer)."""
        self.expected, self.last_ts, self._resync = None, 0.0, True
        if self.replay_endpoint:
            self._resync_task = asyncio.ensure_future(self._resync_now())

    async def _resync_now(self) -> None:
        async with self._lock:
            if self._resync and await self._replay(0):
                self._resync = False

    async def _deliver(self, batch: KVEventBatch, replayed: bool = False) -> None:
        if self._resync and not replayed:
            self._resync = False
            if self.replay_endpoint:
                await self._replay(0, until=batch.seq)
        if self.expected is not None and batch.seq < self.expected:
            if batch.ts <= self.last_ts:
                return  # a batch already delivered (replay and PUB overlap)
            self.report.restarted(self.rank)  # a new publisher: its numbers start over
            self.expected = None
            if self.replay_endpoint and not replayed:
                await self._replay(0, until=batch.seq)
        if self.expected is not None and batch.seq > self.expected:
            if self.replay_endpoint and not replayed:
                await self._replay(self.expected, until=batch.seq)
            if self.expected is not None and batch.seq > self.expected:
                self.report.missed(self.rank, self.expected, batch.seq - 1)
        if self.expected is not None and batch.seq < self.expected:
            return  # the replay delivered it already
        self.report.batch(batch, replayed)
        self.expected, self.last_ts = batch.seq + 1, batch.ts

    async def _replay(self, start: int, until: int | None = None) -> bool:
        """Ask the replay socket for batches from `start` (up to, not including, `until`) and deliver
        them; False when it did not answer."""
        if self.replay_endpoint is None:
            return False  # no replay socket to ask
        dealer = self._ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        try:
            dealer.connect(self.replay_endpoint)
            await dealer.send_multipart([b"", start.to_bytes(8, "big")])
            while True:
                if not await dealer.poll(REPLAY_TIMEOUT_S * 1000):
                    # The PUB link is as it was: only the catching up failed.
                    self.report.status(self.link, f"no answer from the replay socket {self.replay_endpoint}")
                    return False
                frames = await dealer.recv_multipart()
                if len(frames) != 4 or frames[2] == END_OF_REPLAY:
                    break
                batch = decode_frames(frames[1:], self.rank)
                if until is not None and batch.seq >= until:
                    break
                if self.expected is None and batch.seq > start:
                    self.report.missed(self.rank, start, batch.seq - 1)  # older than the buffer keeps
                await self._deliver(batch, replayed=True)
        except KVEventDecodeError as exc:
            self.report.status("up", f"the replay socket sent something else than KV event batches: {exc}")
        finally:
            dealer.close(linger=0)
        return True

    async def _watch(self, monitor: zmq.asyncio.Socket) -> None:
        """Report the PUB connection's state from the socket monitor."""
        retrying = False  # said "retrying" since the last connect / disconnect (say it once)
        while True:
            event = (await recv_monitor_message(monitor))["event"]
            if event == zmq.EVENT_CONNECTED:
                retrying, self.link = False, "up"
                self.report.status("up", f"connected to {self.endpoint}")
            elif event == zmq.EVENT_DISCONNECTED:
                retrying, self.link = False, "down"
                self.report.status("down", f"{self.endpoint} went away (reconnecting)")
            elif event == zmq.EVENT_CONNECT_RETRIED and not retrying:
                retrying, self.link = True, "connecting"
                self.report.status("connecting", f"nothing answers at {self.endpoint} yet (retrying)")
