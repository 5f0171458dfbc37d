"""One vLLM server's feeds folded into its `WatchState`: /metrics read every `poll_s` (less often
while the server idles: poll_pacing.py), /v1/models with the tokenizer (once, and after each
restart), /server_info's scheduler limits (until the server answers), and its KV events, one ZMQ
subscriber per data-parallel rank that /metrics reports. The dashboard of one server and the fleet
view (one feed per replica) both run them; each runs its long tasks through `start`."""

import asyncio
import time
from collections.abc import Callable, Coroutine

from enginetui.vllm_watch.kv_events import KVEventBatch, rank_endpoint
from enginetui.vllm_watch.poll_pacing import PollPacing
from enginetui.vllm_watch.server import ServerError, VllmClient, load_decoder
from enginetui.vllm_watch.state import WatchState
from enginetui.vllm_watch.subscriber import KvSubscriber, SubscriberCallbacks

POLL_S = 1.0  # /metrics reading interval
SILENCE_CHECK_S = 5.0  # how often to check that KV events come when vLLM caches blocks

Start = Callable[[Coroutine], object]  # runs a coroutine as a background task of the app (a Textual worker)


class ServerFeed:
    """Reads one vLLM server into `state` until the app ends."""

    def __init__(
        self,
        state: WatchState,
        client: VllmClient,
        start: Start,
        *,
        kv_events: str | None,
        kv_replay: str | None = None,
        tokenizer: str | None = None,
        poll_s: float = 1.0,
        on_tokenizer: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state  # where everything read is folded
        self.client = client  # the HTTP calls
        self.start = start  # how a long task is run
        self.kv_events = kv_events  # rank 0's KV events PUB endpoint (None: don't listen)
        self.kv_replay = kv_replay  # rank 0's replay endpoint (None: no catching up)
        self.tokenizer = tokenizer  # where to load the tokenizer from (None: the served model's path)
        self.poll_s = poll_s  # /metrics reading interval while the server works
        self.pacing = PollPacing(poll_s)  # the wait between readings (longer while the server idles)
        self.num_readings = 0  # /metrics readings attempted
        self.on_tokenizer = on_tokenizer  # told the directory of a tokenizer once it is loaded (the recorder)
        self.subscribers: dict[int, KvSubscriber] = {}  # rank -> its subscriber
        self._decoder_source: str | None = None  # what the tokenizer was loaded for
        self._limits_answered = False  # /server_info answered (with the limits, or that it has none)

    async def poll_metrics(self) -> None:
        """Read /metrics every poll_s (less often while the server idles); on the way, learn
        the model (once, and again after a restart)."""
        while True:
            started = time.monotonic()
            self.pacing.reading_starts()
            sample = await self.read_metrics()
            wait = self.pacing.after_reading(sample)
            await self.pacing.wait(max(0.02, wait - (time.monotonic() - started)))

    async def read_metrics(self):
        """One reading of /metrics folded into the state (None: it failed)."""
        self.num_readings += 1
        try:
            sample = await self.client.metrics()
            restarts = self.state.restarts
            self.state.apply_metrics(sample)
            if self.state.restarts != restarts:
                for sub in self.subscribers.values():
                    sub.resync()
            self.follow_new_ranks(sample.engines)
        except ServerError as exc:
            self.state.metrics_failed(time.time(), str(exc))
            return None
        try:
            if self.state.server is None or self.state.restarts != restarts:
                await self.learn_model()
            else:
                await self.learn_limits()
        except ServerError as exc:
            self.state.models_failed(time.time(), str(exc))
        return sample

    def wake(self) -> None:
        """Work shows outside /metrics: read it soon, at the busy interval."""
        self.pacing.wake()

    async def learn_model(self) -> None:
        info = await self.client.models()
        self.state.set_server(info)
        source = self.tokenizer or info.root  # before the limits: a failed /server_info read must not leave it out
        if source != self._decoder_source:
            self._decoder_source = source
            decode, how = await asyncio.to_thread(load_decoder, source)
            if decode is not None:
                self.state.caches.set_decoder(decode)
                if self.on_tokenizer is not None:
                    self.on_tokenizer(source)
            self.state.tokenizer_loaded(time.time(), decode is not None, how)
        self._limits_answered = False  # a restarted server may have new ones
        await self.learn_limits()

    async def learn_limits(self) -> None:
        """vLLM's scheduler limits from /server_info, which the rebuild needs both of; asked again on later
        readings until the server answers (a read that timed out on a loaded machine is not its answer)."""
        limits = self.state.limits
        if self._limits_answered or (limits.max_num_seqs and limits.max_num_batched_tokens):
            return
        read = await self.client.scheduler_limits()
        self._limits_answered = True
        if read is not None:
            self.state.limits_read(time.time(), *read)

    def check_kv_silence(self) -> None:
        if self.state.kv_events_missing() and self.state.kv_link != "silent":
            self.state.kv_status(
                time.time(),
                "silent",
                f"vLLM has cached blocks since we attached, but none were published at {self.kv_events}",
            )

    def follow_new_ranks(self, engines: list[str]) -> None:
        """One subscriber per data-parallel rank that /metrics reports (rank r publishes on port + r)."""
        if not self.kv_events:
            return
        for engine in engines:
            if engine.isdigit() and int(engine) not in self.subscribers:
                self.follow_rank(int(engine))

    def follow_rank(self, rank: int) -> None:
        if self.kv_events is None:
            raise RuntimeError("following a rank's KV events needs their endpoint (--kv-events)")
        callbacks = SubscriberCallbacks(
            batch=self._on_batch,
            status=lambda status, message: self.state.kv_status(time.time(), status, message),
            missed=lambda r, first, last: self.state.batches_missed(time.time(), r, first, last),
            restarted=lambda r: self.state.publisher_restarted(time.time(), r),
        )
        replay = rank_endpoint(self.kv_replay, rank) if self.kv_replay else None
        sub = self.subscribers[rank] = KvSubscriber(rank_endpoint(self.kv_events, rank), replay, rank, callbacks)
        self.start(self._run_subscriber(sub))

    def _on_batch(self, batch: KVEventBatch, replayed: bool) -> None:
        self.state.apply_batch(batch, replayed)
        if not replayed:  # the server is caching blocks now
            self.wake()

    async def _run_subscriber(self, sub: KvSubscriber) -> None:
        try:
            await sub.run()
        except ValueError as exc:
            self.state.kv_status(time.time(), "down", str(exc))
