"""Run in a subprocess by test_light.py: the watcher on a vLLM server (URL, KV events and replay
endpoints, the last KV batch's sequence number from argv), proxy on, tokenizer loaded, then idle a while; prints what it imported and
the CPU it took idling, as JSON."""

import asyncio
import json
import sys
import time

from enginetui.cli import build_parser
from enginetui.vllm_probe.with_vllm import VllmTUI
from enginetui.vllm_watch.rebuild_engine import RebuildEngine

IDLE_S = 5.0  # how long it idles while measured


async def main(url: str, kv_events: str, kv_replay: str, last_seq: str) -> dict:
    build_parser()  # the command line's path too (`enginetui attach --vllm ...`)
    app = VllmTUI(RebuildEngine(url), url, kv_events=kv_events, kv_replay=kv_replay, proxy=("127.0.0.1", 0))
    async with app.run_test(size=(160, 48)) as pilot:
        caches = app.vllm.caches
        while not (caches.decode and app.vllm.proxy_url and caches.ranks and caches.ranks[0].last_seq == int(last_seq)):
            await pilot.pause(0.05)  # until the cache's whole history is folded
        await pilot.pause(1.5)  # the first redraws done
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(IDLE_S)
        share = (time.process_time() - cpu) / (time.monotonic() - wall)
    heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
    return {"heavy_modules": heavy, "idle_cpu_share": share}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:5]))))
