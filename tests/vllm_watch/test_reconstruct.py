"""The queues rebuilt from the requests seen, and their agreement with vLLM's gauges."""

from enginetui.vllm_watch.panels import queues_text
from enginetui.vllm_watch.reconstruct import QueueCheck, agreement, rebuilt_queues
from enginetui.vllm_watch.requests import WatchedRequest
from enginetui.vllm_watch.state import WatchState
from tests.vllm_watch.wire import reading


def request(req_id: str, arrival: float, first: float | None, end: float | None, status: str = "finished"):
    view = WatchedRequest(req_id, 0, "c", "POST", "/v1/completions", arrival=arrival, stream=True)
    view.first_token, view.finished, view.status = first, end, status if end is not None else "streaming"
    return view


def test_a_request_waits_until_its_first_token_and_runs_until_its_end():
    views = [
        request("a", 0.0, 1.0, 3.0),
        request("b", 0.5, 2.0, 4.0),
        request("c", 2.5, None, None),
        request("refused", 0.2, None, 0.3, "rejected"),
    ]
    assert rebuilt_queues(views, 0.25) == (0, 1)  # a waits; the refused one never queued in vLLM
    assert rebuilt_queues(views, 0.4) == (0, 1)
    assert rebuilt_queues(views, 1.5) == (1, 1)
    assert rebuilt_queues(views, 2.6) == (2, 1)
    assert rebuilt_queues(views, 3.5) == (1, 1)
    models = WatchedRequest("m", 0, "c", "GET", "/v1/models", arrival=0.0)
    assert rebuilt_queues([models], 1.0) == (0, 0)  # other routes queue nowhere


def test_each_reading_with_traffic_and_the_first_at_rest_is_checked_against_the_rebuilt_queues():
    state = WatchState("http://h:1", None)
    state.apply_metrics(reading(1.0, 0, 0, running=0))  # no request seen yet: nothing to compare
    state.add_request("r1", "hello", 8, when=1.5)
    state.apply_chunk("r1", " x", 3, 1, when=2.0)
    state.apply_metrics(reading(2.5, 1, 3, running=1))  # r1 runs: agrees
    state.apply_metrics(reading(3.0, 2, 3, running=3))  # vLLM runs 3 (others went around the proxy): does not
    state.end_request("r1", "finished", "length", "", when=3.5)
    state.apply_metrics(reading(4.0, 2, 3, running=0))  # back at rest both ways: checked, so the panel shows it
    state.apply_metrics(reading(5.0, 2, 3, running=0))  # still at rest: not counted
    assert [(c.running, c.rebuilt_running, c.agrees) for c in state.queue_checks] == [
        (1, 1, True),
        (3, 1, False),
        (0, 0, True),
    ]
    assert agreement(state.queue_checks) == (2, 3)
    assert QueueCheck(0, 2, 0, 1, 1).agrees and not QueueCheck(0, 2, 0, 0, 0).agrees
    assert (
        "rebuilt from requests: running 0 · waiting 0 · within ±1 of vLLM on 2/3 readings (67%)"
        in queues_text(state, 120).plain
    )
