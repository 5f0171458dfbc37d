"""What the feed learns of the served model: its tokenizer even when vLLM's /server_info cannot be read (a
loaded machine's timeout), reported as the model read's failure."""

import pytest

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_watch.feed import ServerFeed
from enginetui.vllm_watch.server import ServerError
from enginetui.vllm_watch.state import ServerInfo, WatchState


class LimitsTimeOut:
    """Answers /v1/models; /server_info times out."""

    async def models(self) -> ServerInfo:
        return ServerInfo(model="opt-tiny", root=str(DEFAULT_MODEL_DIR), max_model_len=512)

    async def scheduler_limits(self):
        raise ServerError("cannot reach http://x:1: timed out")


async def test_the_tokenizer_is_loaded_before_the_limits_are_read():
    state = WatchState("http://x:1", None)
    feed = ServerFeed(state, LimitsTimeOut(), lambda coro: None, kv_events=None)
    with pytest.raises(ServerError):
        await feed.learn_model()
    assert state.server is not None and state.caches.decode is not None
    assert state.caches.decode([2]) is not None
