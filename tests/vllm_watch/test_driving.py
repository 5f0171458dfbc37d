"""Driving vLLM from the dashboard (`attach --vllm URL`): a typed prompt goes to vLLM (through the proxy when
there is one) and its text streams back; ^b sends a burst; ^x aborts a prompt sent from here; ^r resets
vLLM's prefix cache, whose clear event then shows in the tree. On the stand-in vLLM server."""

import pytest
from textual.widgets import Input

from enginetui.vllm_probe.attach import ProbeEngine
from enginetui.vllm_probe.with_vllm import VllmTUI
from tests.fakes import vllm_recorded
from tests.support.pilot import until
from tests.vllm_watch.watch_pilot import rebuilt, shown, watch

SIZE = (150, 50)
TEXT = "".join(vllm_recorded.stream_texts())  # the stand-in server's completion


def notified(app, words: str) -> bool:
    return any(words in str(n.message) for n in app._notifications)


async def type_prompt(pilot, app, prompt: str) -> None:
    prompt_box = app.query_one("#prompt", Input)
    assert app.focused is prompt_box  # typing is typing
    prompt_box.value = prompt
    await pilot.press("enter")


async def test_a_typed_prompt_goes_through_the_proxy_and_its_text_streams_back(fake):
    app = watch(fake, proxy=("127.0.0.1", 0))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.proxy_url is not None and app.vllm.server is not None)
        await type_prompt(pilot, app, "Return the")
        await until(pilot, lambda: "r1" in app.state.requests and not app.state.requests["r1"].active)
        mine = app.state.requests["r1"]
        assert (mine.status, mine.text, mine.finish_reason, mine.num_output_tokens) == ("finished", TEXT, "length", 24)
        assert mine.num_prompt_tokens == 60 and mine.first_token_time is not None  # vLLM's usage, chunk by chunk
        assert fake.completions[-1]["prompt"] == "Return the\n" and fake.completions[-1]["request_id"] == "enginetui-r1"
        # the proxy lists it under the dashboard's name, so the rebuild's steps for it are r1's
        await until(pilot, lambda: "r1" in app.vllm.requests and not app.vllm.requests["r1"].active)
        assert app.vllm.requests["r1"].text == TEXT and app.vllm.proxied == 1
        assert " r1 " in shown(app, "#vllm-requests") and "r1" in shown(app, "#requests")


async def test_without_a_proxy_a_prompt_goes_to_vllm_itself_and_a_burst_sends_many(fake):
    app = watch(fake, kv_events=None, burst_size=3)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        await type_prompt(pilot, app, "hello")
        await until(pilot, lambda: "r1" in app.state.requests and app.state.requests["r1"].status == "finished")
        assert app.state.requests["r1"].text == TEXT and not app.vllm.requests  # nothing went by a proxy
        await pilot.press("ctrl+b")
        await until(pilot, lambda: len([v for v in app.state.requests.values() if v.status == "finished"]) == 4)
        assert sorted(body["request_id"] for body in fake.completions) == [f"enginetui-r{i}" for i in range(1, 5)]
        assert all(body["ignore_eos"] for body in fake.completions[1:])  # a burst runs past EOS


async def test_abort_closes_a_prompt_sent_from_here_and_clear_removes_it(fake):
    fake.stream = fake.stream.replace("data: [DONE]", "")  # a stream that stops short of its end: still live
    fake.stream = "\n\n".join([*fake.stream.split("\n\n")[:3]] * 200)
    app = watch(fake, kv_events=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        await type_prompt(pilot, app, "hello")
        await until(pilot, lambda: "r1" in app.state.requests and app.state.requests["r1"].text)
        assert app.selected == "r1"
        await pilot.press("ctrl+x")
        await until(pilot, lambda: app.state.requests["r1"].status == "aborted")
        await pilot.press("ctrl+l")
        await until(pilot, lambda: "r1" not in app.state.requests)


async def test_with_the_probe_a_typed_prompt_goes_to_vllm_too(fake, tmp_path):
    app = VllmTUI(ProbeEngine(f"ipc://{tmp_path}/probe.sock"), fake.url, kv_events=None, poll_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.vllm.server is not None)
        await type_prompt(pilot, app, "hello")
        await until(pilot, lambda: "r1" in app.state.requests and app.state.requests["r1"].status == "finished")
        assert app.state.requests["r1"].text == TEXT


@pytest.mark.slow  # the recorded session's KV events played into the app: seconds on 2 cores
async def test_reset_prefix_cache_answers_and_the_clear_event_shows_in_the_tree(fake):
    app = watch(fake)
    async with app.run_test(size=SIZE) as pilot:
        fake.play_all()
        tree = app.vllm.caches
        await until(pilot, lambda: tree.ranks and tree.ranks[0].num_cleared == 1 and tree.ranks[0].num_cached)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: notified(app, "vLLM reset its prefix cache"))
        await until(pilot, lambda: tree.ranks[0].num_cleared == 2 and not tree.ranks[0].num_cached)
        assert "0/64 blocks cached" in shown(app, "#vllm-tree") and "reset 2×" in shown(app, "#vllm-tree")
        assert any("reset its prefix cache (asked from here)" in line.text for line in app.vllm.log)


async def test_keys_that_cannot_apply_say_why_in_one_line():
    app = rebuilt("http://127.0.0.1:9", kv_events=None)  # nothing listens there
    async with app.run_test(size=SIZE) as pilot:
        await type_prompt(pilot, app, "hello")
        await until(pilot, lambda: notified(app, "has not answered /v1/models yet: nothing sent"))
        assert not app.state.requests
        await pilot.press("ctrl+r")
        await until(pilot, lambda: notified(app, "cannot reach http://127.0.0.1:9"))
        await pilot.press("ctrl+p")
        await until(pilot, lambda: notified(app, "pause, step and slow motion"))
