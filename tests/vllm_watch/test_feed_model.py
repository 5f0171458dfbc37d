"""What the feed learns of the served model: its tokenizer even when vLLM's /server_info cannot be read (a
loaded machine's timeout), reported as the model read's failure; the limits on a later reading."""

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_watch.feed import ServerFeed
from enginetui.vllm_watch.server import ServerError
from enginetui.vllm_watch.state import ServerInfo, WatchState


class LimitsTimeOut:
    """Answers /v1/models; /server_info times out, `timeouts` times."""

    def __init__(self, timeouts: int = 1_000) -> None:
        self.timeouts = timeouts  # /server_info reads that time out before it answers
        self.limit_reads = 0

    async def models(self) -> ServerInfo:
        return ServerInfo(model="opt-tiny", root=str(DEFAULT_MODEL_DIR), max_model_len=512)

    async def scheduler_limits(self):
        self.limit_reads += 1
        if self.limit_reads <= self.timeouts:
            raise ServerError("cannot reach http://x:1: timed out")
        return 4, 256


async def test_the_tokenizer_is_loaded_before_the_limits_are_read():
    state = WatchState("http://x:1", None)
    feed = ServerFeed(state, LimitsTimeOut(), lambda coro: None, kv_events=None)
    with pytest.raises(ServerError):
        await feed.learn_model()
    assert state.server is not None and state.caches.decode is not None
    assert state.caches.decode([2]) is not None


async def test_limits_that_timed_out_are_read_again_until_the_server_answers():
    state = WatchState("http://x:1", None)
    client = LimitsTimeOut(timeouts=1)
    feed = ServerFeed(state, client, lambda coro: None, kv_events=None)
    with pytest.raises(ServerError):
        await feed.learn_model()
    assert state.limits.max_num_batched_tokens is None
    await feed.learn_limits()  # the next /metrics reading's
    assert (state.limits.max_num_seqs, state.limits.max_num_batched_tokens, state.limits.source) == (
        4,
        256,
        "/server_info",
    )
    await feed.learn_limits()
    assert client.limit_reads == 2  # answered: not asked again
