"""The one dashboard on a vLLM without a probe (`attach --vllm URL`): its vLLM column on the recorded real session,
played back by FakeVllm over HTTP and ZMQ (Pilot)."""

from pathlib import Path

from textual.widgets._footer import FooterKey

from enginetui.dashboard.widgets.event_log import EventLog
from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.vllm_watch import panels
from enginetui.vllm_watch.burst import burst_items
from enginetui.vllm_watch.prefix_tree import PrefixCaches
from enginetui.vllm_watch.state import SchedulerLimits, WatchState
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.fakes import vllm_recorded
from tests.fakes.vllm_server import FakeVllm
from tests.support.pilot import until
from tests.vllm_watch.watch_pilot import rebuilt, shown, step_time, watch

SIZE = (150, 50)
BURST = Path(__file__).parent / "fixtures" / "opt-tiny-burst"  # 64 requests through the proxy, real vLLM 0.32


def recorded_tree(last_seq: int | None = None) -> set:
    caches = PrefixCaches()
    for batch in vllm_recorded.batches():
        if last_seq is None or batch.seq <= last_seq:
            caches.apply(batch)
    return {k for k, b in caches.ranks[0].blocks.items() if b.cached}


async def test_the_recorded_session_fills_every_panel_vllm_feeds(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None and app.vllm.caches.decode is not None)
        assert "● /metrics up" in shown(app, "#vllm-status")
        fake.play_until(step_time("the first prompt again"))
        tree = app.vllm.caches
        await until(pilot, lambda: tree.ranks and len(tree.ranks[0].roots()) == 1 and tree.ranks[0].num_cached >= 4)
        text = shown(app, PrefixTreePanel)
        assert "Return the number of item" in text  # decoded with the served model's tokenizer
        assert "├ " in text and "└ " in text  # the two prompts branch after their shared prefix
        fake.play_all()
        await until(
            pilot,
            lambda: (
                tree.ranks[0].num_cleared == 1
                and fake.t == float("inf")
                and app.vllm.latest is not None
                and app.vllm.latest.total("vllm:request_success_total") >= 24
            ),
        )
        assert {k for k, b in tree.ranks[0].blocks.items() if b.cached} == recorded_tree()
        assert tree.ranks[0].num_removed > 0  # the burst evicted blocks
        assert any(line.kind == "clear" and "the prefix cache was reset" in line.text for line in app.vllm.log)
        server = shown(app, "#vllm-metrics")
        assert "of 64 blocks × 32 tok" in server and "prefix-cache hits" in server
        await pilot.pause(0.1)
        assert app.query_one("#vllm-metrics").content_size.height == len(server.splitlines())  # grew to fit
        assert "not published" not in server
        latency = shown(app, "#vllm-latency")
        assert latency.splitlines()[1].startswith("TTFT") and " ms" in latency.splitlines()[1]
        tree_head = shown(app, PrefixTreePanel).splitlines()[0]
        assert "32 tok/block" in tree_head and " tok hit" in tree_head and "reused" not in tree_head


async def test_batches_lost_on_the_way_are_fetched_from_the_replay_socket(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.kv_link == "up")
        fake.play_until(step_time("a burst"), drop={3, 4, 5, 6})
        last = fake.last_seq
        await until(pilot, lambda: app.vllm.caches.ranks and app.vllm.caches.ranks[0].last_seq == last)
        assert {k for k, b in app.vllm.caches.ranks[0].blocks.items() if b.cached} == recorded_tree(last)
        assert app.vllm.missed_batches == 0
        assert any(line.text.endswith("(replayed)") for line in app.vllm.log)


async def test_attaching_late_catches_up_on_the_caches_history(fake):
    fake.play_until(step_time("a streamed completion"))  # before the dashboard listens
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.caches.ranks and app.vllm.caches.ranks[0].last_seq == fake.last_seq)
        assert {k for k, b in app.vllm.caches.ranks[0].blocks.items() if b.cached} == recorded_tree(fake.last_seq)


async def test_a_server_restart_clears_the_tree_and_both_links_recover(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        fake.play_until(step_time("the first prompt again"))
        await until(pilot, lambda: app.vllm.caches.ranks and app.vllm.caches.ranks[0].num_cached >= 4)
        fake.stop()
        await until(pilot, lambda: app.vllm.link == "down")
        assert "/metrics down" in shown(app, "#vllm-status")
        assert "cannot reach" in shown(app, "#vllm-metrics")
        fake.start_again()
        fake.play_until(step_time("a burst"), drop=set(range(10_000)))  # cached while we were away: replay only
        await until(pilot, lambda: app.vllm.link == "up" and app.vllm.restarts == 1)
        await until(pilot, lambda: app.vllm.caches.ranks[0].last_seq == fake.last_seq)  # caught up, no live batch
        new = PrefixCaches()  # what the new server published: the recording between the two times
        for frame, batch in zip(vllm_recorded.frames(), vllm_recorded.batches(), strict=True):
            if step_time("the first prompt again") < frame["t"] <= step_time("a burst"):
                new.apply(batch)
        assert app.vllm.caches.ranks[0].blocks.keys() == new.ranks[0].blocks.keys()
        assert [line for line in app.vllm.log if line.kind == "store"][-1].text.endswith("(replayed)")
        fake.play_until(step_time("the same burst"))  # and live batches follow on
        await until(pilot, lambda: app.vllm.caches.ranks[0].last_seq == fake.last_seq)
        assert "1 restart" in shown(app, "#vllm-status")
        assert any(line.kind == "restart" for line in app.vllm.log)


async def test_a_wrong_address_says_so_and_keeps_trying(fake):
    app = rebuilt("http://127.0.0.1:9", kv_events="ipc:///nonexistent/dir/kv.sock")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.link == "down")
        await pilot.pause(0.2)
        assert "cannot reach http://127.0.0.1:9" in shown(app, "#vllm-metrics")
        assert "/metrics down" in shown(app, "#vllm-status")
        assert app.vllm.kv_link in ("connecting", "down")
        assert "waiting for vLLM at http://127.0.0.1:9" in shown(app, PrefixTreePanel)


async def test_a_server_without_kv_events_gets_a_clear_message_and_the_other_panels(fake):
    app = watch(fake, kv_events="ipc:///tmp/enginetui-no-such-publisher.sock", kv_replay=None, silence_check_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        fake.play_all()
        await until(pilot, lambda: app.vllm.kv_link == "silent")
        text = shown(app, PrefixTreePanel)
        assert "none were published at ipc:///tmp/enginetui-no-such-publisher.sock" in text
        assert "--kv-events-config" in text
        assert "prefix-cache hits" in shown(app, "#vllm-metrics")  # /metrics panels still work


async def test_without_kv_events_the_tree_panel_says_how_to_get_them(fake):
    app = watch(fake, kv_events=None, kv_replay=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        assert "KV events are not listened to" in shown(app, PrefixTreePanel)
        assert "KV events off" in shown(app, "#vllm-status")


async def test_an_api_key_is_sent_and_a_missing_one_is_named():
    fake = FakeVllm(api_key="sesame")
    try:
        app = watch(fake)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "API key" in app.vllm.model_error)
            assert app.vllm.server is None and app.vllm.link == "up"  # /metrics is open, as in vLLM's
            assert "pass --api-key KEY" in shown(app, "#vllm-status")
        app = watch(fake, api_key="sesame")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.vllm.server is not None)
    finally:
        fake.stop()


async def test_each_data_parallel_rank_has_its_own_tree():
    fake = FakeVllm(ranks=2)
    try:
        app = watch(fake)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.vllm.server is not None)
            fake.play_until(step_time("a burst"))
            caches = app.vllm.caches
            await until(
                pilot,
                lambda: (
                    sorted(caches.ranks) == [0, 1] and all(c.last_seq == fake.last_seq for c in caches.ranks.values())
                ),
            )
            assert {k for k, b in caches.ranks[1].blocks.items() if b.cached} == recorded_tree(fake.last_seq)
            text = shown(app, PrefixTreePanel)
            assert "rank 0 · " in text and "rank 1 · " in text
    finally:
        fake.stop()


def test_panel_texts_before_anything_arrived():
    from enginetui.vllm_watch.state import WatchState

    state = WatchState("http://h:1", None)
    assert "reading http://h:1/metrics" in panels.server_text(state, 80).plain
    assert panels.latency_text(state, 80).plain == "—"


async def test_the_screen_says_its_figures_are_inferred_and_what_it_still_needs(fake):
    """Without a probe the engine's panels wait for the rebuild, which needs vLLM's limits; the column says so."""
    app = watch(fake, limits=SchedulerLimits(max_num_seqs=4))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None and app.vllm.latest is not None)
        assert app.vllm.limits.max_num_batched_tokens is None and app.vllm.rebuild is None  # not a dev-mode server
        inferred = shown(app, "#vllm-oracle")
        assert inferred.startswith("INFERRED (rebuilt from outside): not yet: it needs its limits")
        assert "no proxy (--proxy-port PORT): it sees no request" in inferred
        assert "waiting for the rebuild of " + fake.url in shown(app, "#requests")
        assert "INFERRED" in str(app.query_one("#vllm-oracle").border_title)
    fake.dev_mode_limits = (16, 512)
    app = watch(fake, limits=SchedulerLimits(max_num_seqs=4))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.limits.source == "/server_info" and app.vllm.rebuild is not None)
        assert (app.vllm.limits.max_num_seqs, app.vllm.limits.max_num_batched_tokens) == (4, 512)  # given wins
        assert app.vllm.rebuild.setup.max_num_seqs == 4


async def test_keys_that_would_step_an_engine_say_vllm_is_not_stepped_and_help_says_what_is_inferred(fake):
    app = watch(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        assert app.focused is app.query_one("#prompt")  # typed prompts go to vLLM (tests/vllm_watch/test_driving.py)
        await until(pilot, lambda: [key.description for key in app.query(FooterKey)])
        assert "Burst" in [key.description for key in app.query(FooterKey)]
        await pilot.press("ctrl+s")
        await until(pilot, lambda: any("not on a real vLLM" in str(n.message) for n in app._notifications))
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        about = dict(app.screen.about)
        assert "the requests through the proxy" in about["inferred"] and "--probe ADDR" in about["inferred"]
        assert fake.url in about["vLLM server"]


async def test_the_rebuild_drives_the_engine_panels_as_a_probe_would(fake):
    """The recorded burst's /metrics readings and proxied requests, folded into the app's watcher: the
    rebuild's steps reach the dashboard's one state model as step events."""
    app = watch(fake)
    limits, items = burst_items(BURST)
    replayed = WatchState(fake.url, None, limits=limits, rebuild_sinks=[app.vllm_engine])
    async with app.run_test(size=SIZE) as pilot:
        for start in range(0, len(items), 500):  # as they came: the dashboard follows step by step
            for item in items[start : start + 500]:
                replayed.apply_recorded(item)
            await pilot.pause()
        rebuild = replayed.rebuild
        await until(pilot, lambda: app.state.latest is not None and app.state.latest.step == len(rebuild.steps) > 600)
        assert len(app.state.requests) == 64 and all(v.status == "finished" for v in app.state.requests.values())
        assert app.state.latest.total_preemptions == rebuild.num_preemptions > 0
        assert app.state.latest.num_blocks == rebuild.setup.num_blocks
        assert sum(v.num_preemptions for v in app.state.requests.values()) == rebuild.num_preemptions
        # vLLM's reason, from its stream (the log panel's newest lines are the app's own links: noted now, after
        # the recording's steps)
        assert any(line.kind == "finish" and line.text.startswith("p64 · length") for line in app.state.log)


async def test_the_model_panel_shows_the_served_model_and_the_log_has_vllms_own_lines(fake):
    app = watch(fake, kv_events=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None and app.vllm.latest is not None)
        model = shown(app, "#model")
        assert "opt-tiny" in model and "context 512 tok" in model and "from /v1/models" in model
        assert "not known" not in model
        log = shown(app, EventLog)
        assert "    0 link    KV events: not listened to" in log  # vLLM's link lines among the engine's
