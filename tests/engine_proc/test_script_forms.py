"""The engine starts from any kind of caller without re-running the caller's `__main__`:
a script without a main guard, stdin, `-c`, a REPL, a notebook and a thread. Each form runs
as a real subprocess and must print the generated text; its EngineCore must be gone after."""

import subprocess
import sys

import psutil
import pytest
import zmq

from enginetui.core.config import EngineConfig
from enginetui.core.engine.engine_host import EngineProcess
from enginetui.core.engine.errors import EngineStartupError
from enginetui.serve.process import wait_gone
from tests.support.checkout import checkout_env

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # each a fresh interpreter starting an engine: ~10 s

# A plain top-level script, as users write them: no `if __name__ == "__main__":` guard.
# Every statement fits one line, so the same text works typed into a REPL.
SCRIPT = """\
from enginetui.core import LLM, SamplingParams
llm = LLM(model=MODEL, skip_tokenizer_init=True, num_gpu_blocks_override=16)
out = llm.generate([[2, 5, 6, 7]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True), use_tqdm=False)
print("ENGINE", llm.engine.client.engine_pid, "TOKENS", len(out[0].outputs[0].token_ids), flush=True)
"""

THREADED = """\
import threading
from enginetui.core import LLM, SamplingParams
def work():
    llm = LLM(model=MODEL, skip_tokenizer_init=True, num_gpu_blocks_override=16)
    out = llm.generate([[2, 5, 6, 7]], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True), use_tqdm=False)
    print("ENGINE", llm.engine.client.engine_pid, "TOKENS", len(out[0].outputs[0].token_ids), flush=True)
    llm.shutdown()
t = threading.Thread(target=work); t.start(); t.join()
"""


def _code(template: str, model_dir: str) -> str:
    return f"MODEL = {model_dir!r}\n" + template


def _check(stdout: str) -> None:
    line = next((ln for ln in stdout.splitlines() if ln.startswith("ENGINE")), None)
    assert line is not None, f"no output line in:\n{stdout}"
    _, pid, _, tokens = line.split()
    assert tokens == "3"
    assert wait_gone(int(pid), 5.0), "EngineCore outlived its caller"


@pytest.mark.parametrize("form", ["script", "stdin", "dash-c", "repl", "thread"])
def test_engine_starts_from_every_kind_of_caller(form, tiny_opt_dir, tmp_path):
    code = _code(THREADED if form == "thread" else SCRIPT, tiny_opt_dir)
    script = tmp_path / "ex.py"
    script.write_text(code)
    if form in ("script", "thread"):
        args, stdin = [str(script)], None
    elif form == "stdin":
        args, stdin = ["-"], code
    elif form == "dash-c":
        args, stdin = ["-c", code], None
    else:  # an interactive interpreter reading the lines as typed
        args, stdin = ["-i", "-q"], code + "exit()\n"
    proc = subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
        env=checkout_env(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check(proc.stdout)


def test_engine_starts_from_a_notebook(tiny_opt_dir, monkeypatch):
    import nbclient
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_code(SCRIPT, tiny_opt_dir))])
    monkeypatch.setenv("PYTHONPATH", checkout_env()["PYTHONPATH"])  # the kernel imports this checkout
    nbclient.NotebookClient(notebook, timeout=150, kernel_name="python3").execute()
    stdout = "".join(o.get("text", "") for o in notebook.cells[0].outputs if o.get("name") == "stdout")
    _check(stdout)


def test_a_child_that_dies_at_start_up_says_why():
    crash = "import sys; print('no CUDA driver found (simulated)', file=sys.stderr); sys.exit(3)"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(EngineStartupError) as info:
        EngineProcess(EngineConfig(), zmq.Context(), command=[sys.executable, "-c", crash])
    message = str(info.value)
    assert "exited with code 3 before it was ready" in message
    assert "no CUDA driver found (simulated)" in message  # its last words reach the caller
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_failed_start_up_points_at_the_log_file(tmp_path):
    log = tmp_path / "engine.log"
    with pytest.raises(EngineStartupError, match=rf"exited with code 3 before it was ready(.|\n)*its log: {log}"):
        EngineProcess(
            EngineConfig(), zmq.Context(), log_file=str(log), command=[sys.executable, "-c", "import os; os._exit(3)"]
        )
