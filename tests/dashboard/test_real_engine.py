"""The dashboard on the REAL engine: AsyncLLM with EngineCore in its child process, the embedded
default model (and a Llama-family directory). Slower than the scripted-runner tests (seconds: the
child starts and loads the model), so there are only three, each bounded in time."""

import json
import math
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest
from safetensors import safe_open

from enginetui.core.engine.async_llm import AsyncLLM
from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.engine_link import open_engine
from enginetui.dashboard.widgets.model_panel import ModelPanel, binary_size, short_count
from enginetui.dashboard.widgets.prompt_bar import PromptBar
from enginetui.dashboard.widgets.requests_table import RequestsTable
from enginetui.dashboard.widgets.title_bar import TitleBar
from enginetui.settings import SamplingSettings
from tests.dashboard.scenes import SIZE
from tests.models.families import make_family_dir
from tests.support.pilot import until

ENGINE_ARGS = {"model": None, "num_gpu_blocks_override": 64, "seed": 0, "device": "cpu"}  # embedded model


def gone(pid: int) -> bool:
    """No live process has this pid (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(120)
def test_engine_core_writes_its_output_to_the_log_file_not_the_terminal(tmp_path, capfd):
    log_file = tmp_path / "logs" / "engine.log"  # the folder is made by the child
    llm = AsyncLLM.from_engine_args(log_file=str(log_file), **ENGINE_ARGS)
    pid = llm.engine_pid
    try:
        assert pid is not None and pid != os.getpid()
        for fd in (1, 2):  # C and Rust writers too, not only Python's sys.stdout / stderr
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == str(log_file)
    finally:
        llm.shutdown()
    text = log_file.read_text()
    assert f"EngineCore[{pid}] INFO enginetui.core_proc: EngineCore starting (parent pid {os.getpid()})" in text
    assert "EngineCore ready" in text and "64 KV blocks" in text  # EngineCore's own start-up log line
    assert f"EngineCore[{pid}] INFO enginetui.core_proc: EngineCore exiting (code 0)" in text
    assert "EngineCore" not in capfd.readouterr().err


SINGLE_STEPS = 12  # steps taken one by one before the text is checked


def row_of(app: EngineTUI, req_id: str) -> str:
    """The requests panel's row of `req_id`, as plain text."""
    lines = app.query_one(RequestsTable).render().plain.splitlines()
    return next((line for line in lines if f" {req_id} " in line), "")


@pytest.mark.timeout(120)
async def test_typed_prompt_streams_then_pause_step_and_quit_on_the_real_engine(tmp_path):
    log_file = str(tmp_path / "engine.log")
    engine = open_engine(ENGINE_ARGS, log_file=log_file)
    pid = engine.engine_pid
    app = EngineTUI(engine, seed=0, log_file=log_file)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the engine to connect")
            # Paused first, so the run is the same however fast the machine is.
            await pilot.press("ctrl+p")
            await until(pilot, lambda: app.state.paused, "the engine to pause")
            app.query_one(PromptBar).settings = SamplingSettings(max_tokens=400, seed=1, ignore_eos=True)
            await pilot.press(*"Once upon a time", "enter")
            await until(pilot, lambda: "r1" in app.state.requests, "the request to reach the engine")
            for _ in range(SINGLE_STEPS):
                step = app.state.step
                await pilot.press("ctrl+s")
                await until(pilot, lambda step=step: app.state.step == step + 1, "one single step")

            def streamed() -> bool:  # some generated text, and the panel shows (the end of) it
                text = app.state.requests["r1"].text
                return len(text.strip()) >= 12 and text.strip()[-6:] in row_of(app, "r1")

            await until(pilot, streamed, "text in the requests panel")
            assert "RUNNING" in row_of(app, "r1")
            paused_at = app.state.step
            await pilot.pause(0.5)  # nothing moves while paused
            assert app.state.step == paused_at and app.state.paused
            await pilot.press("ctrl+s")
            await until(pilot, lambda: app.state.step > paused_at, "the single step")
            await pilot.pause(0.5)
            assert app.state.step == paused_at + 1
            await until(pilot, lambda: f"step {paused_at + 1}" in str(app.query_one(TitleBar).content), "the title")
            assert "⏸ paused" in str(app.query_one(TitleBar).content)
            assert app.state.requests["r1"].status == "running"

            await pilot.press("ctrl+q")
        assert app.return_code == 0
        assert gone(pid), "the EngineCore child outlived the app"
    finally:
        engine.shutdown()
    assert "EngineCore ready" in Path(log_file).read_text()


@pytest.mark.timeout(180)
async def test_a_killed_engine_is_said_and_r_restarts_it_with_the_request_history_kept(tmp_path):
    log_file = str(tmp_path / "engine.log")
    engine = open_engine(ENGINE_ARGS, log_file=log_file)
    first_pid = engine.engine_pid
    # Slow motion (50 ms a step, kept by the restart) so that r1 is still running when it is killed.
    app = EngineTUI(
        engine,
        seed=0,
        log_file=log_file,
        step_interval_ms=50,
        reopen=lambda: open_engine(ENGINE_ARGS, log_file=log_file),
    )
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the engine to connect")
            app.query_one(PromptBar).settings = SamplingSettings(max_tokens=400, seed=1, ignore_eos=True)
            await pilot.press(*"Once upon a time", "enter")
            await until(pilot, lambda: app.state.requests["r1"].num_output_tokens >= 4, "r1 to stream")
            os.kill(first_pid, signal.SIGKILL)
            await until(pilot, lambda: app.phase == "stopped", "the dashboard to see the engine die")
            await until(pilot, lambda: "✖ engine stopped" in str(app.query_one(TitleBar).content), "the title")
            assert app.state.requests["r1"].status == "error"
            await pilot.press("ctrl+r")
            await until(pilot, lambda: app.phase == "ready", "the restarted engine", timeout=60)
            second_pid = app.engine.engine_pid
            assert second_pid not in (None, first_pid) and gone(first_pid)
            await pilot.press(*"Return the number of", "enter")

            def streamed() -> bool:
                return "r2" in app.state.requests and app.state.requests["r2"].num_output_tokens >= 4

            await until(pilot, streamed, "r2 to stream on the new engine")
            assert list(app.state.requests) == ["r1", "r2"] and app.state.requests["r1"].status == "error"
            assert [r.req_id for r in app.state.latest.running] == ["r2"]  # the new engine's state
            assert "▶ running" in str(app.query_one(TitleBar).content)
            await pilot.press("ctrl+q")
        assert gone(second_pid), "the restarted EngineCore outlived the app"
    finally:
        engine.shutdown()
        app.engine.shutdown()


@pytest.mark.timeout(120)
async def test_a_llama_family_directory_runs_and_the_model_panel_describes_it(tmp_path):
    """`enginetui --model <Llama dir>`: a random-weight LlamaForCausalLM (GQA) with the embedded
    model's tokenizer streams a typed prompt; the model panel shows what the engine loaded."""
    model_dir = tmp_path / "llama"
    make_family_dir(model_dir, "llama", vocab_size=4096)  # the embedded tokenizer's vocabulary
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(DEFAULT_MODEL_DIR / name, model_dir / name)
    config = json.loads((model_dir / "config.json").read_text())
    with safe_open(model_dir / "model.safetensors", "pt") as weights:
        num_parameters = sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    head_size = config["hidden_size"] // config["num_attention_heads"]
    kv_bytes = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_size * 4  # K and V, fp32
    log_file = str(tmp_path / "engine.log")
    engine = open_engine({**ENGINE_ARGS, "model": str(model_dir), "num_gpu_blocks_override": 32}, log_file=log_file)
    app = EngineTUI(engine, seed=0, log_file=log_file)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the engine to connect")
            await pilot.press(*"Once upon a time", "enter")
            await until(pilot, lambda: len(app.state.requests["r1"].text) >= 12, "r1 to stream")
            model = " · ".join(app.query_one(ModelPanel).render().plain.splitlines())
            assert model == (
                f"LlamaForCausalLM · {short_count(num_parameters)} params · float32 · context "
                f"{config['max_position_embeddings']:,} tok · KV {binary_size(kv_bytes)}/tok · "
                f"pool 512 tok = {binary_size(512 * kv_bytes)} · "  # 32 blocks of 16 tokens
                "sized by --num-gpu-blocks-override"
            )
            await pilot.press("ctrl+q")
    finally:
        engine.shutdown()


@pytest.mark.slow  # starts an engine process
@pytest.mark.timeout(120)
async def test_a_typed_prompt_gets_a_reply_that_starts_cleanly(tmp_path):
    """The embedded model continues text: sent as typed, "...brown fox" gets "ies: ..." (greedy), the
    last word carried on. The prompt box ends the prompt's line, so the reply starts one of its own."""
    engine = open_engine(ENGINE_ARGS, log_file=str(tmp_path / "engine.log"))
    app = EngineTUI(engine, seed=0)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.phase == "ready", "the engine to connect")
            app.query_one(PromptBar).settings = SamplingSettings(max_tokens=12, temperature=0)
            app.query_one("#prompt").value = "Tell me a story about a quick brown fox"
            await pilot.press("enter")
            await until(
                pilot,
                lambda: "r1" in app.state.requests and not app.state.requests["r1"].active,
                "the reply",
                timeout=60,
            )
            reply = app.state.requests["r1"].text
            assert app.state.requests["r1"].prompt.endswith("fox\n")
            assert reply[:1].isupper(), f"the reply does not start a sentence: {reply!r}"
            await pilot.press("ctrl+q")
    finally:
        engine.shutdown()
