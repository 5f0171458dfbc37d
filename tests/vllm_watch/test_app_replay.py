"""The vLLM dashboard on the recorded real session, played back by FakeVllm over HTTP and ZMQ (Pilot)."""

from textual.widgets._footer import FooterKey

from enginetui.dashboard.widgets.help_screen import HelpScreen
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.vllm_watch import panels
from enginetui.vllm_watch.app import VllmWatchApp
from enginetui.vllm_watch.prefix_tree import PrefixCaches
from enginetui.vllm_watch.state import SchedulerLimits
from enginetui.vllm_watch.tree_panel import PrefixTreePanel
from tests.fakes.vllm_server import FakeVllm
from tests.support.pilot import until
from tests.vllm_watch import recorded
from tests.vllm_watch.watch_pilot import POLL_S, shown, step_time, watch

SIZE = (150, 50)


def recorded_tree(last_seq: int | None = None) -> set:
    caches = PrefixCaches()
    for batch in recorded.batches():
        if last_seq is None or batch.seq <= last_seq:
            caches.apply(batch)
    return {k for k, b in caches.ranks[0].blocks.items() if b.cached}


async def test_the_recorded_session_fills_every_panel_vllm_feeds(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None and app.state.caches.decode is not None)
        assert "● /metrics up" in shown(app, "#watch-title")
        fake.play_until(step_time("the first prompt again"))
        tree = app.state.caches
        await until(pilot, lambda: tree.ranks and len(tree.ranks[0].roots()) == 1 and tree.ranks[0].num_cached >= 4)
        text = shown(app, PrefixTreePanel)
        assert "Return the number of items in the list" in text  # decoded with the served model's tokenizer
        assert "├ " in text and "└ " in text  # the two prompts branch after their shared prefix
        fake.play_all()
        await until(
            pilot,
            lambda: (
                tree.ranks[0].num_cleared == 1
                and fake.t == float("inf")
                and app.state.latest is not None
                and app.state.latest.total("vllm:request_success_total") >= 24
            ),
        )
        assert {k for k, b in tree.ranks[0].blocks.items() if b.cached} == recorded_tree()
        assert tree.ranks[0].num_removed > 0  # the burst evicted blocks
        assert any(line.kind == "clear" and "the prefix cache was reset" in line.text for line in app.state.log)
        newest = app.state.log[-1]  # the panel ends with it, wrapped whole (older ones scroll off)
        assert f"{newest.kind:<8}{newest.text.split()[0]}" in shown(app, "#watch-log")
        server = shown(app, "#watch-server")
        assert "of 64 blocks × 32 tok" in server and "prefix-cache hits" in server
        await pilot.pause(0.1)
        assert app.query_one("#watch-server").content_size.height == len(server.splitlines())  # grew to fit
        assert "not published" not in server
        latency = shown(app, "#watch-latency")
        assert latency.splitlines()[1].startswith("TTFT") and " ms" in latency.splitlines()[1]
        queues = shown(app, "#watch-queues")
        assert "(capacity 0, deferred 0)" in queues and "tok/step" in queues and "not published" not in queues
        tree_head = shown(app, PrefixTreePanel).splitlines()[0]
        assert "32 tok/block" in tree_head and " tok hit" in tree_head and "reused" not in tree_head


async def test_a_typed_prompt_streams_from_v1_completions(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None)
        app.query_one("#prompt").value = "Return the"  # typed in one go (a key per character is slow in Pilot)
        await pilot.press("enter")
        await until(pilot, lambda: "r1" in app.state.requests and not app.state.requests["r1"].active)
        view = app.state.requests["r1"]
        assert view.status == "finished" and view.finish_reason == "length" and view.tokens() == 24
        assert view.text and view.text in "".join(recorded.stream_texts())
        assert (
            fake.completions[0]["prompt"] == "Return the\n" and fake.completions[0]["stream"] is True
        )  # its line ended
        assert fake.completions[0]["model"] == recorded.session()["models"]["data"][0]["id"]
        row = shown(app, RequestsTable)
        assert " r1 " in row and "FINISHED" in row and " 24 tok " in row and "/" not in row.split("FINISHED")[1][:20]


async def test_the_footer_shows_the_keys_and_the_prompt_box_has_the_focus(fake):
    app = watch(fake)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.state.server is not None)
        assert app.focused is app.query_one("#prompt")
        await until(pilot, lambda: footer_keys(app))  # the footer recomposes its keys after the focus settles
        assert footer_keys(app) == ["Send", "Burst", "Reset cache", "Help", "Quit"]
        assert "^x abort" in str(app.query_one(RequestsTable).border_subtitle)
        assert "just type one" in shown(app, RequestsTable)


def footer_keys(app) -> list[str]:
    return [key.description for key in app.query(FooterKey)]


async def test_batches_lost_on_the_way_are_fetched_from_the_replay_socket(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.kv_link == "up")
        fake.play_until(step_time("a burst"), drop={3, 4, 5, 6})
        last = fake.last_seq
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].last_seq == last)
        assert {k for k, b in app.state.caches.ranks[0].blocks.items() if b.cached} == recorded_tree(last)
        assert app.state.missed_batches == 0
        assert any(line.text.endswith("(replayed)") for line in app.state.log)


async def test_attaching_late_catches_up_on_the_caches_history(fake):
    fake.play_until(step_time("a streamed completion"))  # before the dashboard listens
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].last_seq == fake.last_seq)
        assert {k for k, b in app.state.caches.ranks[0].blocks.items() if b.cached} == recorded_tree(fake.last_seq)


async def test_a_server_restart_clears_the_tree_and_both_links_recover(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        fake.play_until(step_time("the first prompt again"))
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].num_cached >= 4)
        fake.stop()
        await until(pilot, lambda: app.state.link == "down")
        assert "/metrics down" in shown(app, "#watch-title")
        assert "cannot reach" in shown(app, "#watch-server")
        fake.start_again()
        fake.play_until(step_time("a burst"), drop=set(range(10_000)))  # cached while we were away: replay only
        await until(pilot, lambda: app.state.link == "up" and app.state.restarts == 1)
        await until(pilot, lambda: app.state.caches.ranks[0].last_seq == fake.last_seq)  # caught up, no live batch
        new = PrefixCaches()  # what the new server published: the recording between the two times
        for frame, batch in zip(recorded.frames(), recorded.batches(), strict=True):
            if step_time("the first prompt again") < frame["t"] <= step_time("a burst"):
                new.apply(batch)
        assert app.state.caches.ranks[0].blocks.keys() == new.ranks[0].blocks.keys()
        assert [line for line in app.state.log if line.kind == "store"][-1].text.endswith("(replayed)")
        fake.play_until(step_time("the same burst"))  # and live batches follow on
        await until(pilot, lambda: app.state.caches.ranks[0].last_seq == fake.last_seq)
        assert "1 restart" in shown(app, "#watch-title")
        assert any(line.kind == "restart" for line in app.state.log)


async def test_a_wrong_address_says_so_and_keeps_trying(fake):
    app = VllmWatchApp("http://127.0.0.1:9", kv_events="ipc:///nonexistent/dir/kv.sock", poll_s=POLL_S, redraw_hz=50)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.link == "down")
        await pilot.pause(0.2)
        assert "cannot reach http://127.0.0.1:9" in shown(app, "#watch-server")
        assert "/metrics down" in shown(app, "#watch-title")
        assert app.state.kv_link in ("connecting", "down")
        assert "waiting for vLLM at http://127.0.0.1:9" in shown(app, PrefixTreePanel)


async def test_a_server_without_kv_events_gets_a_clear_message_and_the_other_panels(fake):
    app = watch(fake, kv_events="ipc:///tmp/enginetui-no-such-publisher.sock", kv_replay=None, silence_check_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None)
        fake.play_all()
        await until(pilot, lambda: app.state.kv_link == "silent")
        text = shown(app, PrefixTreePanel)
        assert "none were published at ipc:///tmp/enginetui-no-such-publisher.sock" in text
        assert "--kv-events-config" in text
        assert "prefix-cache hits" in shown(app, "#watch-server")  # /metrics panels still work


async def test_without_kv_events_the_tree_panel_says_how_to_get_them(fake):
    app = watch(fake, kv_events=None, kv_replay=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None)
        assert "KV events are not listened to" in shown(app, PrefixTreePanel)
        assert "KV events off" in shown(app, "#watch-title")


async def test_an_api_key_is_sent_and_a_missing_one_is_named():
    fake = FakeVllm(api_key="sesame")
    try:
        app = watch(fake)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "API key" in app.state.model_error)
            assert app.state.server is None and app.state.link == "up"  # /metrics is open, as in vLLM's
            assert "pass --api-key KEY" in shown(app, "#watch-title")
        app = watch(fake, api_key="sesame")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.state.server is not None)
    finally:
        fake.stop()


async def test_reset_key_asks_vllm_to_reset_its_prefix_cache(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        fake.play_until(step_time("a streamed completion"))
        await until(pilot, lambda: app.state.caches.ranks and app.state.caches.ranks[0].num_cached >= 4)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app.state.caches.ranks[0].num_cached == 0)
        assert app.state.caches.ranks[0].num_cleared == 1


async def test_each_data_parallel_rank_has_its_own_tree():
    fake = FakeVllm(ranks=2)
    try:
        app = watch(fake)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.state.server is not None)
            fake.play_until(step_time("a burst"))
            caches = app.state.caches
            await until(
                pilot,
                lambda: (
                    sorted(caches.ranks) == [0, 1] and all(c.last_seq == fake.last_seq for c in caches.ranks.values())
                ),
            )
            assert {k for k, b in caches.ranks[1].blocks.items() if b.cached} == recorded_tree(fake.last_seq)
            text = shown(app, PrefixTreePanel)
            assert "rank 0 · " in text and "rank 1 · " in text
            assert "rank 0 " in shown(app, "#watch-queues") and "rank 1 " in shown(app, "#watch-queues")
    finally:
        fake.stop()


def test_panel_texts_before_anything_arrived():
    from enginetui.vllm_watch.state import WatchState

    state = WatchState("http://h:1", None)
    assert "reading http://h:1/metrics" in panels.server_text(state, 80).plain
    assert panels.latency_text(state, 80).plain == "—"


async def test_help_lists_the_keys_and_what_vllm_does_not_publish(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        assert {"type", "^b", "^x", "^l", "^r", "F1", "^q"} <= {key for key, _ in app.screen.keys}
        assert {"Requests", "prefix cache", "Server", "Latency"} <= set(dict(app.screen.panels))
        about = dict(app.screen.about)
        assert about["server"] == fake.url and about["KV events"] == fake.kv_endpoint
        assert "per-request block tables" in about["not published by vLLM"]
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_vllms_limits_are_read_from_a_dev_mode_server_and_given_ones_kept(fake):
    """The rebuild needs vLLM's limits; /metrics does not say them, a dev-mode server's /server_info does."""
    app = watch(fake, limits=SchedulerLimits(max_num_seqs=4))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.server is not None and app.state.latest is not None)
        assert app.state.limits.max_num_batched_tokens is None  # this server is not in dev mode
        assert "limits unknown: pass vLLM's --max-num-seqs" in shown(app, "#watch-queues")
    fake.dev_mode_limits = (16, 512)
    app = watch(fake, limits=SchedulerLimits(max_num_seqs=4))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.limits.source == "/server_info")
        assert (app.state.limits.max_num_seqs, app.state.limits.max_num_batched_tokens) == (4, 512)  # given wins
        queues = shown(app, "#watch-queues")
        assert "running 0 of max 4" in queues
        assert "limits read from vLLM's /server_info" in queues and "pass vLLM's" not in queues
