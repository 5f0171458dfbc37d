"""A stand-in for `python -m vllm.entrypoints.openai.api_server`: the routes `enginetui bench serve
--compare vllm-server` uses (/health, /version, /v1/models, streamed /v1/completions with token ids),
answering each request with the tokens after the prompt's last one. It writes the flags it was
given and its environment's vLLM CPU variables to $FAKE_VLLM_SERVER_LOG (a JSON line), so a test can
check them, and it starts a child process that must not outlive it (as vLLM's EngineCore). With
--enable-logging-iteration-details it prints a line per token as vLLM's front-end logs an engine step
(a request's first token a step of its prompt, each later one a one-request decode step)."""

import argparse
import asyncio
import json
import os
import subprocess
import sys

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import vllm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--enable-logging-iteration-details", action="store_true")
    args, rest = parser.parse_known_args()
    steps = iter(range(1 << 62))
    engine_core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.environ["FAKE_VLLM_SERVER_LOG"], "a") as log:
        log.write(json.dumps({"argv": sys.argv[1:], "engine_core_pid": engine_core.pid,
                              "env": {k: v for k, v in os.environ.items() if k.startswith("VLLM_CPU")}}) + "\n")
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict:
        return {}

    @app.get("/version")
    async def version() -> dict:
        return {"version": vllm.__version__}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"data": [{"id": args.model}]}

    @app.post("/v1/completions")
    async def completions(body: dict) -> StreamingResponse:
        last = body["prompt"][-1]

        async def chunks():
            for i in range(body["max_tokens"]):
                await asyncio.sleep(0.001)
                if args.enable_logging_iteration_details:
                    prompt = 0 if i else len(body["prompt"])
                    print(f"(APIServer pid={os.getpid()}) INFO 12-03 06:00:00 [loggers.py:203] "
                          f"Iteration({next(steps)}): {int(not i)} context requests, {prompt} context tokens, "
                          f"{int(bool(i))} generation requests, {int(bool(i))} generation tokens, iteration elapsed "
                          f"time: 1.00 ms, CPU KV cache usage: 0.1%", flush=True)
                choice = {"index": 0, "text": "", "token_ids": [(last + 1 + i) % 512]}
                yield f"data: {json.dumps({'choices': [choice]})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
