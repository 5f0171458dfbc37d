"""A fleet watched (`enginetui simulate --replicas N --watch`), recorded (`--record`) and replayed (`enginetui
replay`): one row per replica, the router's choices with its reasons, the fleet's totals; and its picture."""

import asyncio
import io

import pytest
from textual.widgets import Static

from enginetui.cli import main
from enginetui.core.record.reader import read_recording
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.simulate.api import SimSettings, fleet_roles, simulate
from enginetui.simulate.fleet_watch import (
    LIVE_REFUSAL,
    FleetReplayTUI,
    FleetState,
    FleetWatchTUI,
    is_fleet_recording,
    parse_at,
    replicas_table,
)
from enginetui.simulate.watch import LiveSimulation, SimulatedEngine

RUN = dict(
    model="opt-125m",
    hardware="h100",
    dataset="shared-prefix",
    num_prompts=24,
    num_prefixes=3,
    prefix_len=64,
    input_len=32,
    output_len=10,
    request_rate=float("inf"),
    num_gpu_blocks_override=64,
    max_num_seqs=4,
    enable_prefix_caching=True,
    replicas=3,
)
SIZE = (120, 40)


async def until(pilot, done, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        assert loop.time() < deadline, "the watched fleet did not get there"
        await pilot.pause(0.02)


def watched(**changes):
    run = {**RUN, **changes}
    live = LiveSimulation(lambda sink: simulate(live=sink, **run))
    engine = SimulatedEngine(live, 0.0, "opt-125m")
    live.start()
    roles = fleet_roles(SimSettings(**{k: v for k, v in run.items() if k in SimSettings.__dataclass_fields__}))
    return live, engine, FleetWatchTUI(engine, roles, "cache-aware")


def text_of(app, selector: str) -> str:
    from rich.console import Console

    console = Console(width=SIZE[0], record=True, file=io.StringIO())
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


async def test_the_watch_follows_each_replica_to_the_end_of_the_run():
    expected = simulate(**RUN)  # the same run, not watched
    live, engine, app = watched()
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: engine.finished and "finished" in text_of(app, "#fleet-title"))
        state = app.state
        for k, run in enumerate(expected.fleet.runs):
            r = state.replicas[k]
            assert (r.routed, r.done, r.step) == (len(run.requests), len(run.requests), len(run.timeline.end))
            assert (r.running, r.waiting) == (0, 0)
            assert (r.queries, r.hits) == (run.prefix_queries, run.prefix_hits)
        table = text_of(app, "#replicas")
        assert "fleet" in table and f" {RUN['num_prompts']} " in table
        choices = text_of(app, "#choices")
        assert "cache-aware: matched" in choices
        # every request routed once, to the replica the unwatched run chose
        routed = {c.req_id: c.replica for c in state.choices}
        ids = sorted(expected.run.requests, key=lambda r: (r.arrival, int(r.request_id.split("-")[1])))  # as drawn
        assert routed == {r.request_id: k for r, k in zip(ids, expected.fleet.choices)}
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
    live.join(timeout=5)
    assert live.result.summary.num_completed == RUN["num_prompts"]


async def test_the_help_screen_lists_the_fleet_views_keys_and_panels():
    live, engine, app = watched()
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: engine.finished)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        shown = text_of(app.screen, "Static")
        for words in ("keys", "stop the simulation and quit", "panels", "replicas", "router", "fleet"):
            assert words in shown
        assert "3 replicas behind cache-aware" in shown and "prompt box" not in shown  # the fleet takes no text
        assert "play, pause, step and speed" in shown  # the replay's keys, refused while it runs
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("f1")  # as on the dashboard, F1 closes it too
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("space")  # a replay's play key: the live run says where to pause it
        await until(pilot, lambda: any(n.message == LIVE_REFUSAL for n in app._notifications))
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
    live.join(timeout=5)


async def test_a_disaggregated_fleet_shows_its_pools():
    live, engine, app = watched(replicas=1, prefill_replicas=1, decode_replicas=2, enable_prefix_caching=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: engine.finished and "finished" in text_of(app, "#fleet-title"))
        assert "1 prefill + 2 decode replicas" in text_of(app, "#fleet-title")
        table = text_of(app, "#replicas")
        assert "prefill" in table and "decode" in table
        prefill, *decode = app.state.replicas
        assert prefill.done == sum(r.done for r in decode) == RUN["num_prompts"]
    live.join(timeout=5)


def test_a_recorded_fleet_is_one_recording_with_each_event_tagged(tmp_path, capsys):
    path = tmp_path / "fleet.etrec"
    argv = ["simulate", "--model", "opt-125m", "--hardware", "h100", "--dataset", "shared-prefix"]
    argv += ["--num-prompts", "24", "--num-prefixes", "3", "--prefix-len", "64", "--random-input-len", "32"]
    argv += ["--random-output-len", "10", "--num-gpu-blocks-override", "64"]
    argv += ["--max-num-seqs", "4", "--enable-prefix-caching", "--replicas", "3", "--no-progress"]
    assert main([*argv, "--record", str(path)]) == 0
    assert f"recording     {path}" in capsys.readouterr().out
    rec = read_recording(path)
    assert rec.header.replicas == ["replica"] * 3 and rec.trailer is not None and rec.total_missed == 0
    expected = simulate(**RUN)
    events = list(rec.events())
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for k, run in enumerate(expected.fleet.runs):
        mine = [e for e in events if e.replica == k]
        assert [e.step for e in mine] == list(range(1, len(run.timeline.end) + 1))
        assert sum(len(e.added) for e in mine) == len(run.requests)
        assert all(a.routed.startswith("cache-aware: ") for e in mine for a in e.added)
    assert is_fleet_recording(str(path))
    for argv in (
        ["export", str(path), "--format", "csv", str(tmp_path / "csv")],
        ["simulate", "--from-recording", str(path)],
    ):
        assert main(argv) == 2  # one engine's recording only: one line saying where a fleet's opens
        err = capsys.readouterr().err
        assert "a simulated fleet's recording (3 engines): it opens with `enginetui replay`" in err
        assert err.count("\n") == 1
    single = tmp_path / "one.etrec"
    assert (
        main(["simulate", "--model", "opt-125m", "--num-prompts", "2", "--no-progress", "--record", str(single)]) == 0
    )
    assert not is_fleet_recording(str(single)) and not is_fleet_recording(str(tmp_path / "missing"))


async def test_the_replay_steps_plays_and_ends_where_the_run_ended(tmp_path):
    path = tmp_path / "fleet.etrec"
    simulate(**RUN, record=str(path))
    rec = read_recording(path)
    final = FleetState(list(rec.header.replicas))
    for event in rec.events():
        final.apply(event)
    app = FleetReplayTUI(rec)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.index == 0 and "event 1 of" in text_of(app, "#fleet-title")
        await pilot.press("right", "right")
        assert app.index == 2
        await pilot.press("left")
        assert app.index == 1
        await pilot.press("end")
        assert app.index == len(rec) - 1
        assert text_of(app, "#replicas") == _table_text(final)
        await pilot.press("home")
        assert app.index == 0 and app.state.num_events == 1
        await pilot.press("ctrl+s", "ctrl+s")  # the engine replay's keys step here too
        assert app.index == 2
        await pilot.press("g", *"e40", "enter")
        await until(pilot, lambda: app.index == 39)
        await pilot.press("g", *"e0x", "enter")
        await until(pilot, lambda: any("is not a time into the run" in str(n.message) for n in app._notifications))
        assert app.index == 39
        await pilot.press("home", "pageup", "plus", "plus", "ctrl+p")  # 8x, played by ^p as in the engine's replay
        assert app.speed == 8.0
        await until(pilot, lambda: app.index == len(rec) - 1)
        assert text_of(app, "#replicas") == _table_text(final)
    assert parse_at("e3", rec) == 2 and parse_at("0s", rec) == 0
    with pytest.raises(ValueError, match="--at"):
        parse_at("step 4", rec)


def _table_text(state) -> str:
    from rich.console import Console

    console = Console(width=SIZE[0], record=True, file=io.StringIO())
    console.print(replicas_table(state))
    return console.export_text()


def test_the_fleet_mid_run_at_120x40(snap_compare, tmp_path):
    """The fleet's picture: its recording replayed at event 20 of 60, every replica busy."""
    path = tmp_path / "fleet.etrec"
    simulate(**RUN, record=str(path))
    rec = read_recording(path)
    assert len(rec) == 60
    assert snap_compare(FleetReplayTUI(rec, start=19), terminal_size=SIZE)


async def test_a_mixed_fleets_replay_says_what_each_replica_runs_on(tmp_path):
    path = tmp_path / "mixed.etrec"
    simulate(**{**RUN, "hardware": "h100*2,l4"}, record=str(path))
    rec = read_recording(path)
    assert rec.header.replica_models == ["h100", "h100", "l4"]
    final = FleetState(list(rec.header.replicas), list(rec.header.replica_models))
    for event in rec.events():
        final.apply(event)
    app = FleetReplayTUI(rec)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end")
        await until(pilot, lambda: app.index == len(rec) - 1)
        table = text_of(app, "#replicas")
        assert table == _table_text(final)
        rows = table.splitlines()
        assert "runs on" in rows[0] and rows[1].split()[:2] == ["0", "h100"] and rows[3].split()[:2] == ["2", "l4"]
    simulate(**RUN, record=str(tmp_path / "alike.etrec"))
    assert read_recording(tmp_path / "alike.etrec").header.replica_models == []  # alike: no such column
