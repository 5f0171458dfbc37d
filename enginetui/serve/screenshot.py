"""docs/serve.md's picture of a dashboard watching HTTP traffic: `python -m enginetui.serve.screenshot [OUT_DIR]`.

Starts `enginetui serve` (the embedded model, a 48-block pool), attaches the dashboard to it
(RemoteEngine), sends a handful of streamed completions and chat requests with the `openai`
client from threads, and writes OUT_DIR/serve-attach.svg once several of them are streaming.
The engine runs in real time, so two runs never draw quite the same picture.
"""

import asyncio
import sys
import threading
from pathlib import Path

from textual.pilot import Pilot

from enginetui.dashboard.app import EngineTUI
from enginetui.dashboard.screenshots import PROMPTS, SIZE, frame_when, ready, streaming_requests
from enginetui.serve.process import ServeProcess
from enginetui.serve.remote_engine import RemoteEngine

NAME = "serve-attach"  # the picture's file name (without .svg)
QUESTIONS = ("What is a class?", "What does the with statement do?")  # chat requests


def traffic(url: str, stop: threading.Event) -> None:
    """Streamed completions and chats, a few at a time, until `stop`."""
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0)

    def complete(prompt: str) -> None:
        for _ in client.completions.create(
            model="default", prompt=prompt, max_tokens=96, temperature=0.8, stream=True, extra_body={"ignore_eos": True}
        ):
            if stop.is_set():
                return

    def chat(question: str) -> None:
        for _ in client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": question}],
            max_tokens=96,
            temperature=0.8,
            stream=True,
            extra_body={"ignore_eos": True},
        ):
            if stop.is_set():
                return

    while not stop.is_set():
        workers = [threading.Thread(target=complete, args=(p,)) for p in PROMPTS]
        workers += [threading.Thread(target=chat, args=(q,)) for q in QUESTIONS]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


async def play(pilot: Pilot, url: str) -> str:
    app = await ready(pilot)
    stop = threading.Event()
    sender = threading.Thread(target=traffic, args=(url, stop), daemon=True)
    sender.start()
    try:

        def pick() -> str | None:
            running = [r for r in streaming_requests(app, 24) if r.startswith("chatcmpl-")]
            return running[0] if running and len(streaming_requests(app, 12)) >= 4 else None

        return await frame_when(pilot, NAME, pick, lambda svg: svg.count("RUNNING") >= 4)
    finally:
        stop.set()


async def capture() -> str:
    server = ServeProcess("--num-gpu-blocks-override", "48", "--seed", "0")
    try:
        engine = RemoteEngine.connect(server.url, None)
        app = EngineTUI(engine, probe=engine.probe, seed=0, history_interval=0.25)
        try:
            async with app.run_test(size=SIZE) as pilot:
                return await play(pilot, server.url)
        finally:
            engine.shutdown()
    finally:
        server.stop()


def main(out_dir: str = "screenshots") -> int:
    path = Path(out_dir) / f"{NAME}.svg"
    path.parent.mkdir(exist_ok=True)
    path.write_text(asyncio.run(capture()), encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
