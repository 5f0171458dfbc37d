"""`enginetui attach`: the dashboard app on a RemoteEngine, driven with Pilot against the real
server. It sees a request sent by the `openai` client, streams its own typed prompt through the
server, and pauses / steps / resumes the one engine that every attached dashboard sees; a pause
it makes is logged with its id and ends when it detaches."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.widgets.model_panel import ModelPanel
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.serve.remote_engine import AttachError, RemoteEngine
from enginetui.settings import SamplingSettings
from tests.serve.serving import API_KEY, NUM_BLOCKS, wait_for_line
from tests.support.pilot import until

SIZE = (120, 40)
WAIT_S = 60.0  # every wait below is bounded by this


def row_of(app: EngineTUI, req_id: str) -> str:
    lines = app.query_one(RequestsTable).render().plain.splitlines()
    return next((line for line in lines if f" {req_id} " in line), "")


@contextlib.asynccontextmanager
async def attached(engine: RemoteEngine) -> AsyncIterator[None]:
    """`engine` attached as a dashboard is (its event stream open) while inside; detached after."""

    async def follow() -> None:
        async for _ in engine.events():
            pass

    task = asyncio.create_task(follow())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
def remote(server):
    engine = RemoteEngine.connect(server.url, API_KEY)
    yield engine
    engine.shutdown()


def test_attach_refuses_a_missing_key_and_a_wrong_url(server):
    with pytest.raises(AttachError, match="wants an API key"):
        RemoteEngine.connect(server.url, None)
    with pytest.raises(AttachError, match="cannot reach"):
        RemoteEngine.connect("http://127.0.0.1:9", API_KEY)


@pytest.mark.timeout(180)
async def test_attached_dashboard_sees_an_openai_client_request(server, remote):
    app = EngineTUI(remote, probe=remote.probe, seed=0)
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=WAIT_S)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.phase == "ready", "the dashboard to attach")
        await until(pilot, lambda: "pid" in str(app.query_one("#process").render()), "EngineCore's reading")
        model = app.query_one(ModelPanel).render().plain  # the served engine's EngineInfo, from /info
        assert model.startswith(remote.info.architecture) and f"pool {NUM_BLOCKS * remote.info.block_size} tok" in model
        out = await client.completions.create(
            model="default", prompt="The function", max_tokens=24, temperature=0, extra_body={"ignore_eos": True}
        )
        await until(
            pilot,
            lambda: app.state.requests.get(out.id) and not app.state.requests[out.id].active,
            "the openai request to show and end",
        )
        view = app.state.requests[out.id]
        assert view.status == "finished" and view.finish_reason == "length"
        assert view.num_output_tokens == 24 and view.num_prompt_tokens == out.usage.prompt_tokens
        assert view.prompt == "The function" and view.text == out.choices[0].text  # decoded from the events
        # The panel draws the state of the last redraw (at most 1/15 s behind the state).
        await until(pilot, lambda: "FINISHED" in row_of(app, out.id), "its row to say FINISHED")
        await pilot.press("ctrl+q")
    await client.close()


@pytest.mark.timeout(180)
async def test_attached_dashboard_streams_its_prompt_and_controls_the_one_engine(server, remote):
    other = RemoteEngine.connect(server.url, API_KEY)  # a second attached dashboard's view
    app = EngineTUI(remote, probe=remote.probe, seed=0)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the dashboard to attach")
            await other.pause()  # another dashboard pauses the one engine: this one sees it, and acts on it
            await until(pilot, lambda: app.state.paused and app.paused, "the pause to show here")
            app.query_one(PromptBar).settings = SamplingSettings(max_tokens=40, seed=1, ignore_eos=True)
            await pilot.press(*"Once upon a time", "enter")
            engine_id = remote.names.engine("r1")  # the engine's name for it, which everyone else sees
            assert engine_id.startswith("cmpl-") and engine_id.endswith("-r1")
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while engine_id not in [p.req_id for p in (await other.snapshot()).waiting]:  # it reaches the paused engine
                assert asyncio.get_running_loop().time() < deadline, "r1 did not reach the engine"
                await pilot.pause(0.05)
            step = app.state.step
            await pilot.press("ctrl+s")
            await until(pilot, lambda: app.state.step == step + 1, "one step")
            await until(pilot, lambda: app.state.requests["r1"].num_computed_tokens, "r1 to run, under its own name")
            await pilot.press("ctrl+p")  # resumes: the engine was paused (by the other dashboard)
            await until(pilot, lambda: not app.state.paused, "the engine to resume")
            assert not (await other.snapshot()).paused
            await until(pilot, lambda: app.state.requests["r1"].status == "finished", "r1 to finish")
            view = app.state.requests["r1"]
            assert view.num_output_tokens == 40 and view.text.strip() and view.prompt == "Once upon a time\n"
            assert not any(v.req_id.endswith("-r1") for v in app.state.ordered())  # one row for r1, not two
            await pilot.press("ctrl+q")
    finally:
        other.shutdown()
        if (await other.snapshot()).paused:
            await other.resume()


@pytest.mark.timeout(180)
async def test_a_late_attach_draws_a_running_request_whole_and_the_state_another_dashboard_set(server, remote):
    """Dashboard A (attached throughout) slows the engine down and pauses it while an openai-client
    request streams; dashboard B, attached afterwards, shows that request's prompt and its whole
    text so far (from the greeting snapshot), the slow motion and the pause; B resumes and the
    text ends as the client's does. A detaches: its slow motion ends with it."""
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=WAIT_S)
    received: list[str] = []  # the client's text chunks

    async def stream() -> None:
        chunks = await client.completions.create(
            model="default",
            prompt="The function",
            max_tokens=40,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
            extra_headers={"X-Request-Id": "late-1"},
        )
        async for chunk in chunks:
            received.append(chunk.choices[0].text)

    reading = None
    holder = RemoteEngine.connect(server.url, API_KEY)  # dashboard A
    try:
        async with attached(holder):
            await holder.set_step_interval(0.1)  # slow motion: 100 ms a step
            reading = asyncio.create_task(stream())
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while len(received) < 5:
                assert asyncio.get_running_loop().time() < deadline, "the client's first tokens did not come"
                await asyncio.sleep(0.05)
            await holder.pause()
            await late_attach(server, received, reading)
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while (await remote.snapshot()).step_interval_ms:  # A detached: its slow motion ended with it
            assert asyncio.get_running_loop().time() < deadline, "slow motion outlived the dashboard that set it"
            await asyncio.sleep(0.05)
        wait_for_line(server, rf"full speed again: dashboard {holder.names.tag} .* detached")
    finally:
        holder.shutdown()
        if reading is not None:
            reading.cancel()
        await remote.resume()
        await remote.set_step_interval(0)
        await client.close()


async def late_attach(server, received: list[str], reading: asyncio.Task) -> None:
    """Dashboard B attaches late, sees the request and the state A set, and resumes the engine."""
    late_engine = RemoteEngine.connect(server.url, API_KEY)
    late = EngineTUI(late_engine, probe=late_engine.probe, seed=0)
    try:
        await _look_and_resume(late, received, reading)
    finally:
        late_engine.shutdown()


async def _look_and_resume(late: EngineTUI, received: list[str], reading: asyncio.Task) -> None:
    async with late.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            lambda: "cmpl-late-1" in late.state.requests and late.state.requests["cmpl-late-1"].prompt,
            "B to draw the request from the event stream's greeting",
        )
        view = late.state.requests["cmpl-late-1"]
        assert late.state.paused and late.state.step_interval_ms == 100  # what A set, B sees
        assert view.active and 5 <= view.num_output_tokens < 40
        assert view.prompt == "The function" and not view.text.startswith("…")
        so_far = view.text
        await pilot.press("ctrl+p")  # B resumes the engine A paused
        await until(pilot, lambda: view.status == "finished", "the request to finish on B")
        await asyncio.wait_for(reading, WAIT_S)
        assert so_far and view.text.startswith(so_far) and view.text == "".join(received)
        assert view.num_output_tokens == 40 and view.ttft() is None  # its first token came before B looked
        await pilot.press("ctrl+q")


@pytest.mark.timeout(180)
async def test_a_pause_ends_when_the_dashboard_that_made_it_detaches(server, remote):
    """A dashboard pauses the engine: the server logs who, /health and /v1/models still answer, a
    request sent meanwhile waits; the dashboard quits, the pause ends and the request is answered."""
    app = EngineTUI(remote, probe=remote.probe, seed=0)
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=WAIT_S)
    http = httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=WAIT_S)
    start = len(server.lines)
    waiting = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the dashboard to attach")
            await pilot.press("ctrl+p")
            await until(pilot, lambda: app.state.paused, "the pause")
            line = wait_for_line(server, rf"engine paused by dashboard {remote.names.tag} \(127\.0\.0\.1:\d+\)", start)
            assert "--max-pause-s" in line
            assert (await http.get("/health")).status_code == 200  # a pause is not an outage
            assert (await http.get("/v1/models")).status_code == 200
            waiting = asyncio.create_task(
                client.completions.create(
                    model="default",
                    prompt="The function",
                    max_tokens=8,
                    temperature=0,
                    extra_body={"ignore_eos": True},
                    extra_headers={"X-Request-Id": "during-pause"},
                )
            )
            await until(
                pilot,
                lambda: (
                    "cmpl-during-pause" in [p.req_id for p in (app.state.latest.waiting if app.state.latest else [])]
                ),
                "the request to wait in the paused engine",
            )
            assert not waiting.done()
            await pilot.press("ctrl+q")  # the dashboard that paused it goes away
        out = await asyncio.wait_for(waiting, WAIT_S)  # answered once the pause ended
        assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 8
        wait_for_line(server, rf"engine resumed: dashboard {remote.names.tag} .*which paused it, detached", start)
        assert not (await remote.snapshot()).paused
    finally:
        if waiting is not None:
            waiting.cancel()
        if (await remote.snapshot()).paused:
            await remote.resume()
        await client.close()
        await http.aclose()
