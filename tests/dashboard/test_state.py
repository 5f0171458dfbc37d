"""DashboardState folds step events and streamed outputs into what the screen shows (no Textual)."""

import pytest

from enginetui.core.engine.events import Admission, Preemption, PrefillChunk, RequestAdded, RequestEnd
from enginetui.core.sampling_params import SamplingParams
from enginetui.dashboard.state import HISTORY_POINTS, DashboardState
from tests.dashboard.builders import T0, event, output, progress


def kinds(state: DashboardState) -> list[str]:
    return [f"{line.step} {line.kind} {line.text}" for line in state.log]


def test_submitted_request_is_sent_until_the_engine_lists_it():
    s = DashboardState()
    s.add_request("r1", "hello", 16)
    view = s.requests["r1"]
    assert (view.status, view.prompt, view.max_tokens, view.active) == ("sent", "hello", 16, True)
    s.apply_event(event(1, waiting=[progress("r1", 0, 3, status="waiting")]))
    assert (view.status, view.num_prompt_tokens) == ("waiting", 3)
    s.add_request("r2", "hi", 16)
    s.apply_output(output("r2", "out", 1))  # the output came before the event that lists r2
    assert s.requests["r2"].status == "running"
    s.add_request("r3", "one two", 16)
    s.apply_event(event(2, kind="update", added=[RequestAdded("r3", [5, 6], SamplingParams(max_tokens=16), 16, 0, T0)]))
    assert (s.requests["r3"].status, s.requests["r3"].num_prompt_tokens) == ("waiting", 2)  # acknowledged: queued


def test_an_added_request_shows_its_prompt_length_before_it_is_listed():
    s = DashboardState()
    added = RequestAdded("r7", [1, 2, 3, 4, 5], SamplingParams(max_tokens=9), 9, 0, T0)
    s.apply_event(event(0, kind="update", added=[added]))  # someone else's request: known from the event alone
    view = s.requests["r7"]
    assert (view.status, view.num_prompt_tokens, view.num_tokens, view.max_tokens) == ("waiting", 5, 5, 9)


def test_admission_is_logged_from_the_event_that_says_so():
    s = DashboardState()
    s.apply_event(event(1, waiting=[progress("r1", 0, 10, status="waiting")]))
    s.apply_event(
        event(
            2,
            running=[progress("r1", 10, 11, prompt=10, blocks=[3])],
            scheduled={"r1": 10},
            admitted=[Admission("r1", 10, 0, False)],
            new_tokens={"r1": [7]},
        )
    )
    s.apply_event(event(3, running=[progress("r1", 11, 12, prompt=10, blocks=[3])], scheduled={"r1": 1}))
    assert kinds(s) == ["2 admit r1 · prompt 10 tok"]
    assert s.requests["r1"].status == "running"
    assert s.requests["r1"].block_ids == [3]


def test_chunked_prefill_is_logged_for_each_chunk():
    s = DashboardState()
    s.apply_event(
        event(
            1,
            running=[progress("r1", 16, 40, prompt=40)],
            scheduled={"r1": 16},
            admitted=[Admission("r1", 16, 0, False)],
            chunks=[PrefillChunk("r1", 16, 24)],
        )
    )
    s.apply_event(
        event(2, running=[progress("r1", 32, 40, prompt=40)], scheduled={"r1": 16}, chunks=[PrefillChunk("r1", 16, 8)])
    )
    s.apply_event(
        event(
            3,
            running=[progress("r1", 40, 41, prompt=40)],
            scheduled={"r1": 8},
            chunks=[PrefillChunk("r1", 8, 0)],
            new_tokens={"r1": [5]},
        )
    )
    assert kinds(s) == [
        "1 admit r1 · prompt 40 tok · chunk 16",
        "2 chunk r1 · +16 tok · 8 tok left",
        "3 chunk r1 · +8 tok · prefill done",
    ]


def test_preemption_sets_status_lost_tokens_and_logs():
    s = DashboardState()
    s.apply_event(event(1, running=[progress("r1", 20, 21, prompt=16, blocks=[0, 1])], scheduled={"r1": 20}))
    pre = Preemption("r1", lost_tokens=20, freed_blocks=2)
    victim = progress("r1", 0, 21, prompt=16, status="preempted", preemptions=1)
    s.apply_event(event(2, waiting=[victim], preempted=[pre], freed=[0, 1]))
    view = s.requests["r1"]
    assert (view.status, view.lost_tokens, view.num_preemptions, view.block_ids) == ("preempted", 20, 1, [])
    assert kinds(s)[-1] == "2 preempt r1 · lost 20 tok · freed 2 blocks"
    s.apply_event(
        event(
            3,
            running=[progress("r1", 21, 22, prompt=16, preemptions=1)],
            scheduled={"r1": 21},
            admitted=[Admission("r1", 21, 0, True)],
            new_tokens={"r1": [9]},
        )
    )
    assert kinds(s)[-1] == "3 admit r1 · recompute 21 tok"


def test_one_freed_block_is_singular():
    s = DashboardState()
    s.apply_event(event(1, running=[progress("r2", 8, 9, prompt=8, blocks=[0])], scheduled={"r2": 8}))
    s.apply_event(
        event(
            2,
            waiting=[progress("r2", 0, 9, prompt=8, status="preempted", preemptions=1)],
            preempted=[Preemption("r2", lost_tokens=8, freed_blocks=1)],
            freed=[0],
        )
    )
    assert kinds(s)[-1] == "2 preempt r2 · lost 8 tok · freed 1 block"


@pytest.mark.parametrize(
    ("reason", "status", "line"),
    [
        ("length", "finished", "2 finish r1 · length · 16 tok · max_tokens reached"),
        ("stop", "finished", "2 finish r1 · stop · 16 tok · max_tokens reached"),
        ("abort", "aborted", "2 abort r1 · 16 tok · max_tokens reached"),
        ("error", "error", "2 error r1 · 16 tok · max_tokens reached"),
    ],
)
def test_finish_reasons_map_to_status_words(reason, status, line):
    s = DashboardState()
    s.apply_event(event(1, running=[progress("r1", 5, 6, prompt=5, blocks=[2])], scheduled={"r1": 5}))
    s.apply_event(event(2, finished=[RequestEnd("r1", reason, "max_tokens reached", 16)]))
    view = s.requests["r1"]
    assert (view.status, view.finish_reason, view.num_output_tokens, view.block_ids) == (status, reason, 16, [])
    assert kinds(s)[-1] == line


def test_a_finished_request_counts_its_last_token():
    """The last listing of a request is from the step before its final token was sampled."""
    s = DashboardState()
    s.apply_event(event(1, running=[progress("r1", 66, 67, prompt=4, blocks=[2])], scheduled={"r1": 1}))
    s.apply_event(event(2, finished=[RequestEnd("r1", "length", "max_tokens (64) reached", 64)]))
    view = s.requests["r1"]
    assert (view.num_computed_tokens, view.num_tokens, view.num_output_tokens) == (67, 68, 64)


def test_rejection_at_admission_is_shown_with_its_reason():
    s = DashboardState()
    s.add_request("r9", "long", 16)
    s.apply_event(event(1, rejected=[RequestEnd("r9", "rejected", "prompt needs 90 blocks > pool 64", 0)]))
    assert s.requests["r9"].status == "rejected"
    assert s.requests["r9"].detail == "prompt needs 90 blocks > pool 64"
    assert kinds(s) == ["1 reject r9 · prompt needs 90 blocks > pool 64"]


def test_client_side_refusal_and_failure():
    s = DashboardState()
    s.add_request("r1", "", 16)
    s.refuse("r1", "prompt is empty")
    s.add_request("r2", "x", 16)
    s.fail("r2", "engine died")
    s.fail("r1", "ignored: already ended")
    assert [(v.status, v.detail) for v in s.ordered()] == [("rejected", "prompt is empty"), ("error", "engine died")]
    assert kinds(s) == ["0 reject r1 · prompt is empty", "0 error r2 · engine died"]


def test_outputs_stream_text_and_finish():
    s = DashboardState()
    s.add_request("r1", "p", 16)
    s.apply_output(output("r1", "Once", 1))
    s.apply_output(output("r1", "Once upon", 2))
    view = s.requests["r1"]
    assert (view.text, view.num_output_tokens, view.num_prompt_tokens, view.active) == ("Once upon", 2, 3, True)
    s.apply_output(output("r1", "Once upon a", 3, "length"))
    assert (view.status, view.finish_reason) == ("finished", "length")
    s.apply_output(output("r2", "", 0, "rejected", error="prompt too long"))
    assert (s.requests["r2"].status, s.requests["r2"].detail) == ("rejected", "prompt too long")


def test_a_stale_event_does_not_revive_an_ended_request():
    s = DashboardState()
    s.apply_output(output("r1", "done", 4, "stop"))
    s.apply_event(event(5, running=[progress("r1", 7, 8, prompt=4, blocks=[1])], scheduled={"r1": 1}))
    assert s.requests["r1"].status == "finished"


def test_requests_absent_from_the_scheduler_hold_no_blocks():
    s = DashboardState()
    s.apply_event(event(1, running=[progress("r1", 5, 6, prompt=5, blocks=[4])], scheduled={"r1": 5}))
    s.apply_event(event(2, snapshot=True))  # aborted while paused: gone from the queues
    assert s.requests["r1"].block_ids == []


def test_snapshots_update_state_but_derive_no_log_or_history():
    s = DashboardState(history_interval=0.1)
    s.apply_event(event(1, snapshot=True, running=[progress("r1", 5, 6, prompt=5)], total_out=5))
    assert s.log == type(s.log)() and not s.history.tok_s
    assert s.step == 1 and s.requests["r1"].status == "running"
    # the step the snapshot already reflected arrives late: its admission is still logged,
    # and the snapshot stays the latest word on the engine
    snapshot = s.latest
    s.apply_event(
        event(1, running=[progress("r1", 5, 6, prompt=5)], scheduled={"r1": 5}, admitted=[Admission("r1", 5, 0, False)])
    )
    assert kinds(s) == ["1 admit r1 · prompt 5 tok"] and s.latest is snapshot


def test_history_samples_rates_over_engine_time():
    s = DashboardState(history_interval=0.5)
    for step in range(1, 12):  # 0.1 s per step, 2 tokens per step
        s.apply_event(event(step, running=[progress("r1", step, step + 1, prompt=1)], total_out=2 * step, free=6))
    # an interval's tokens are those of the events inside it: steps 2-5 (the first event is where counting starts), 6-10
    assert list(s.history.tok_s) == pytest.approx([16.0, 20.0])
    assert list(s.history.kv_pct) == [25.0, 25.0]
    assert list(s.history.running) == [1, 1] and list(s.history.waiting) == [0, 0]


def test_time_without_steps_draws_idle_points_from_the_last_events_state():
    s = DashboardState(history_interval=0.5)
    for step in range(1, 11):  # r1 generates 2 tokens per step, 0.1 s apart, then finishes at step 10
        running = [progress("r1", step, step + 1, prompt=1)] if step < 10 else []
        s.apply_event(event(step, running=running, total_out=2 * step, free=6 if step < 10 else 8))
    assert list(s.history.running) == [1]
    s.advance(T0 + 2.0)  # a second after the last event, none since: two more intervals closed on the dashboard's clock
    assert list(s.history.tok_s) == pytest.approx([16.0, 20.0, 0.0])  # steps 6-10, then idle
    assert list(s.history.running) == [1, 0, 0] and list(s.history.kv_pct) == [25.0, 0.0, 0.0]
    s.advance(T0 + 2.05)  # inside the open interval: nothing to close
    assert len(s.history.tok_s) == 3
    version = s.version
    s.apply_event(event(40, running=[progress("r2", 1, 2, prompt=1)], total_out=22, free=7))  # at T0 + 4.0
    assert list(s.history.tok_s) == pytest.approx([16.0, 20.0] + [0.0] * 5)  # the gap before it, idle
    assert s.version > version


def test_a_long_idle_stretch_keeps_only_what_the_sparkline_holds():
    s = DashboardState(history_interval=0.5)
    s.apply_event(event(1, total_out=0))
    s.advance(T0 + 0.1 + 10_000.0)
    assert len(s.history.tok_s) == HISTORY_POINTS and set(s.history.tok_s) == {0.0}


def test_dropped_events_are_counted():
    s = DashboardState()
    s.apply_event(event(1, dropped=3))
    s.apply_event(event(5, dropped=2))
    assert s.dropped_events == 5


def test_timings_of_a_request():
    s = DashboardState()
    s.apply_output(output("r1", "a b c", 5))
    view = s.requests["r1"]
    assert view.queue_time() == pytest.approx(0.1)
    assert view.ttft() == pytest.approx(0.2)
    assert view.tokens_per_s(T0 + 0.6) == pytest.approx(10.0)  # 4 tokens after the first in 0.4 s
    assert view.tokens_per_s(None) is None
    s.apply_output(output("r2", "", 0, first_token=None))
    assert s.requests["r2"].ttft() is None


def test_neighbour_walks_and_clamps():
    s = DashboardState()
    for i in range(1, 4):
        s.add_request(f"r{i}", "p", 4)
    assert s.neighbour(None, 1) == "r1" and s.neighbour(None, -1) == "r3"
    assert s.neighbour("r1", -1) == "r1" and s.neighbour("r2", 1) == "r3" and s.neighbour("r3", 1) == "r3"
    assert DashboardState().neighbour(None, 1) is None


def test_every_change_moves_the_version():
    s = DashboardState()
    versions = [s.version]
    s.add_request("r1", "p", 4)
    versions.append(s.version)
    s.apply_event(event(1))
    versions.append(s.version)
    s.apply_output(output("r1", "x", 1))
    versions.append(s.version)
    assert versions == sorted(set(versions))


def test_a_step_event_overtaken_by_a_later_snapshot_does_not_undo_it():
    import msgspec

    s = DashboardState()
    s.apply_event(event(4, running=[progress("r1", 10, 11, prompt=10)], scheduled={"r1": 10}))
    after_pause = event(5, running=[progress("r1", 11, 12, prompt=10)], snapshot=True)
    s.apply_event(msgspec.structs.replace(after_pause, paused=True))  # the snapshot taken after a pause
    s.apply_event(event(5, running=[progress("r1", 11, 12, prompt=10)], scheduled={"r1": 1}))  # step 5, late
    assert s.paused and s.step == 5
    s.apply_event(event(6, running=[progress("r1", 12, 13, prompt=10)], scheduled={"r1": 1}))  # a new step
    assert not s.paused and s.step == 6


def test_clearing_ended_requests_keeps_live_ones_and_their_colours():
    s = DashboardState()
    for req_id in ("r1", "r2", "r3"):
        s.add_request(req_id, "p", 16)
    s.apply_output(output("r1", "done", 4, "length"))
    s.refuse("r3", "prompt is empty")
    assert s.clear_ended() == 2
    assert list(s.requests) == ["r2"]
    s.apply_event(event(1, finished=[RequestEnd("r1", "length", "", 4)]))  # late word about a cleared one
    assert list(s.requests) == ["r2"]
    s.add_request("r4", "p", 16)
    assert [v.index for v in s.ordered()] == [1, 3]  # colours stay distinct


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from enginetui.core.models.default_model import DEFAULT_MODEL_DIR

    return AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)


def test_someone_elses_request_shows_its_prompt_and_text_decoded_from_the_events(tokenizer):
    s = DashboardState(tokenizer=tokenizer)
    prompt = tokenizer.encode("The function")  # BOS first, as the engine got it
    said = tokenizer.encode(" returns a tuple of the function.", add_special_tokens=False)
    s.apply_event(event(1, kind="update", added=[RequestAdded("cmpl-x", prompt, SamplingParams(), 16, 0, T0)]))
    assert s.requests["cmpl-x"].prompt == "The function" and s.requests["cmpl-x"].text == ""
    for i, token in enumerate(said):
        s.apply_event(event(2 + i, new_tokens={"cmpl-x": [token]}))
    view = s.requests["cmpl-x"]
    assert view.text == " returns a tuple of the function." and view.first_token_time == T0 + 0.2
    s.apply_event(event(20, finished=[RequestEnd("cmpl-x", "stop", "EOS", len(said))]))
    assert view.status == "finished" and view.finished_time == T0 + 2.0 and "cmpl-x" not in s.decoders


def test_text_of_a_request_seen_only_from_the_middle_is_marked_partial(tokenizer):
    s = DashboardState(tokenizer=tokenizer)
    s.apply_event(event(5, snapshot=True, running=[progress("cmpl-y", 12, 13, prompt=8)]))  # a late attach
    s.apply_event(event(6, new_tokens={"cmpl-y": tokenizer.encode(" a tuple", add_special_tokens=False)}))
    assert s.requests["cmpl-y"].text == "… a tuple" and s.requests["cmpl-y"].prompt == ""
    assert s.requests["cmpl-y"].first_token_time is None  # its first token came before this dashboard looked


def test_a_late_attach_snapshot_with_prompts_and_output_so_far_shows_the_whole_text(tokenizer):
    prompt = tokenizer.encode("The function")
    said = tokenizer.encode(" returns a tuple of the function.", add_special_tokens=False)
    s = DashboardState(tokenizer=tokenizer)
    running = progress("cmpl-z", len(prompt) + 3, len(prompt) + 4, prompt=len(prompt))
    s.apply_event(event(4, running=[running], new_tokens={"cmpl-z": said[3:4]}))  # published just before the greeting
    assert s.requests["cmpl-z"].text.startswith("…")
    s.apply_event(
        event(
            5,
            snapshot=True,
            running=[running],
            new_tokens={"cmpl-z": said[:4]},
            added=[RequestAdded("cmpl-z", prompt, SamplingParams(), 16, 0, T0)],
        )
    )
    view = s.requests["cmpl-z"]
    assert view.prompt == "The function" and view.text == tokenizer.decode(said[:4])
    for i, token in enumerate(said[4:]):
        s.apply_event(event(6 + i, new_tokens={"cmpl-z": [token]}))
    assert view.text == " returns a tuple of the function."
    assert view.first_token_time is None and view.ttft() is None  # when its first token came is not known here


def test_own_requests_keep_the_text_of_their_stream(tokenizer):
    s = DashboardState(tokenizer=tokenizer)
    s.add_request("r1", "hello", 16)
    s.apply_event(event(1, kind="update", added=[RequestAdded("r1", [2, 5], SamplingParams(), 16, 0, T0)]))
    s.apply_output(output("r1", "from the stream", 2))
    s.apply_event(event(2, new_tokens={"r1": [9, 9]}))
    assert s.requests["r1"].prompt == "hello" and s.requests["r1"].text == "from the stream"


def test_without_a_tokenizer_others_requests_have_no_text():
    s = DashboardState()
    s.apply_event(event(1, kind="update", added=[RequestAdded("cmpl-z", [2, 5], SamplingParams(), 16, 0, T0)]))
    s.apply_event(event(2, new_tokens={"cmpl-z": [9]}))
    assert s.requests["cmpl-z"].prompt == "" and s.requests["cmpl-z"].text == ""
