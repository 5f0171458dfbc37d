"""The tests' one stand-in vLLM OpenAI server, over the real protocols, in one of two sessions:

- the recorded real session (the default): HTTP on 127.0.0.1 (/v1/models, /metrics, streamed
  /v1/completions, /reset_prefix_cache, an optional API key) and vLLM's KV event sockets (a PUB
  socket sending the recorded batches as recorded, a ROUTER replay socket answering as vLLM's
  ZmqEventPublisher does). The test moves the recording forward (`play_until`), can drop batches on
  the way (a gap the dashboard must fill from the replay socket), and can stop and start the server
  (a restart: a new process start time, sequence numbers from 0, an empty cache);
- an echo server (`echo_model`): a completion of token ids streams the tokens after the prompt's last
  one, with vLLM's line per engine step on stdout when asked (`log_steps`). The stand-in vLLM package
  (tests/fakes/vllm_package) runs it as `python -m vllm.entrypoints.openai.api_server`.

Both answer /health and /version as vLLM does.
"""

import itertools
import json
import os
import queue
import re
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import zmq

from enginetui.core.models.default_model import DEFAULT_MODEL_DIR
from enginetui.vllm_watch.kv_events import END_OF_REPLAY, rank_endpoint
from tests.fakes import vllm_recorded
from tests.fakes.vllm_wire import cleared, payload

STREAM_CHUNK_DELAY_S = 0.02  # between the recorded completion's chunks
ECHO_CHUNK_DELAY_S = 0.001  # between an echoed completion's tokens
ECHO_VOCAB = 512  # an echoed token is (the prompt's last + 1 + its index) mod this


class FakeVllm:
    """Plays the recorded session, or echoes (`echo_model`); every method is called from the test's thread.

    With `ranks` > 1 it is a data-parallel server: every rank publishes the recorded batches (marked
    with its rank) on tcp port + rank, as vLLM's publishers do, and /metrics has an engine per rank."""

    def __init__(
        self,
        api_key: str | None = None,
        ranks: int = 1,
        echo_model: str | None = None,
        log_steps: bool = False,
        port: int = 0,
        version: str = "0.32.0",
    ) -> None:
        self.echo_model = echo_model  # the model an echo server serves (None: the recorded session)
        self.log_steps = log_steps  # echo: print vLLM's line per engine step (--enable-logging-iteration-details)
        self.version = version  # what /version answers
        self.api_key = api_key  # required on /v1 routes when set (as vLLM's --api-key)
        self.dev_mode_limits: tuple[int, int] | None = None  # (max_num_seqs, max_num_batched_tokens): /server_info
        self.folder = tempfile.mkdtemp(prefix="fake-vllm-")  # its IPC sockets; kept across restarts
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        if echo_model is not None:
            ranks = 0  # no KV events
            self.models = {"object": "list", "data": [{"id": echo_model, "object": "model", "root": echo_model}]}
        elif ranks == 1:
            self.kv_endpoint = f"ipc://{self.folder}/kv.sock"  # rank 0's PUB socket
            self.replay_endpoint = f"ipc://{self.folder}/replay.sock"  # rank 0's ROUTER socket
        else:
            pub, replay = _free_ports(ranks), _free_ports(ranks)
            self.kv_endpoint, self.replay_endpoint = f"tcp://127.0.0.1:{pub}", f"tcp://127.0.0.1:{replay}"
        self.ranks = [
            _Rank(r, rank_endpoint(self.kv_endpoint, r), rank_endpoint(self.replay_endpoint, r)) for r in range(ranks)
        ]  # each data-parallel rank's publisher
        self.frames: list[dict] = []  # the recorded batches still to send, in order
        self.readings: list[dict] = []  # the recorded /metrics texts
        self.stream = ""  # the recorded SSE of one completion
        if echo_model is None:
            self.frames = vllm_recorded.frames()
            self.readings = vllm_recorded.metrics_texts()
            models = json.loads(json.dumps(vllm_recorded.session()["models"]))
            models["data"][0]["root"] = str(DEFAULT_MODEL_DIR)  # the tokenizer is found here, wherever recorded
            self.models = models  # what /v1/models answers
            self.stream = (vllm_recorded.FIXTURE / "completion_stream.txt").read_text()
        self.steps = itertools.count()  # echo: engine steps logged
        self.t = -1.0  # the recording's time played up to
        self.start_time = 1.0e9  # process_start_time_seconds (changes on restart)
        self.last_ts = 0.0  # vLLM's time of the last batch played (a restarted server starts after it)
        self.completions: list[dict] = []  # bodies of the completions asked for
        self.aborted = 0  # streams whose client went away before the end
        self.headers_seen: dict[str, dict[str, str]] = {}  # path -> its latest request's headers (names lowercased)
        self._http: ThreadingHTTPServer | None = None
        self.port = port  # the HTTP port (0: a free one; kept across restarts)
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def last_seq(self) -> int:
        """Rank 0's last sequence number sent (or buffered)."""
        return self.ranks[0].seq - 1

    # ---- playing -------------------------------------------------------------------------

    def play_until(self, t: float, drop: set[int] | None = None) -> None:
        """Send the recorded batches up to recording time `t` (those with a sequence number in
        `drop` go only to the replay buffer) and serve the last /metrics reading before `t`."""
        while self.frames and self.frames[0]["t"] <= t:
            f = self.frames.pop(0)
            self.last_ts = msgspec.msgpack.decode(f["payload"])[0]
            for rank in self.ranks:
                rank.send(_with_rank(f["payload"], rank.rank), publish=f["seq"] not in (drop or set()))
        self.t = t

    def play_all(self) -> None:
        self.play_until(float("inf"))

    def reset_cache(self) -> None:
        for rank in self.ranks:
            rank.send(payload(time.time(), [cleared()], rank.rank))

    def whole_completion(self) -> dict:
        """The recorded completion as one JSON response (a request without "stream")."""
        chunks = [json.loads(e[6:]) for e in self.stream.split("\n\n") if e.startswith("data: {")]
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        reason = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
        return {
            "id": chunks[0]["id"],
            "object": "text_completion",
            "model": chunks[0]["model"],
            "choices": [{"index": 0, "text": text, "finish_reason": reason}],
            "usage": chunks[-1]["usage"],
        }

    def echo_events(self, body: dict) -> Iterator[str]:
        """An echoed completion's server-sent events: the tokens after the prompt's last one, then [DONE]."""
        last, num_prompt = body["prompt"][-1], len(body["prompt"])
        for i in range(body["max_tokens"]):
            if self.log_steps:  # the first token a step of its prompt, each later one a one-request decode step
                print(
                    f"(APIServer pid={os.getpid()}) INFO 12-03 06:00:00 [loggers.py:203] Iteration({next(self.steps)}): "
                    f"{int(not i)} context requests, {0 if i else num_prompt} context tokens, {int(bool(i))} generation "
                    f"requests, {int(bool(i))} generation tokens, iteration elapsed time: 1.00 ms, CPU KV cache usage: 0.1%",
                    flush=True,
                )
            choice = {"index": 0, "text": "", "token_ids": [(last + 1 + i) % ECHO_VOCAB]}
            yield f"data: {json.dumps({'choices': [choice]})}"
        yield "data: [DONE]"

    def metrics_text(self) -> str:
        if not self.readings:  # an echo server: no readings
            return ""
        shown = [r for r in self.readings if r["t"] <= self.t] or self.readings[:1]
        text = re.sub(
            r"^process_start_time_seconds .*$",
            f"process_start_time_seconds {self.start_time}",
            shown[-1]["text"],
            flags=re.M,
        )
        if len(self.ranks) > 1:  # every engine="0" series again for each other engine
            lines = text.splitlines()
            text = (
                "\n".join(
                    lines
                    + [
                        line.replace('engine="0"', f'engine="{r.rank}"')
                        for r in self.ranks[1:]
                        for line in lines
                        if 'engine="0"' in line
                    ]
                )
                + "\n"
            )
        return text

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        for rank in self.ranks:
            rank.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        for rank in self.ranks:
            rank.stop()

    def start_again(self) -> None:
        """Start after stop() as a new server process: a later start time, empty caches, sequence
        numbers from 0."""
        self.start_time = max(self.start_time + 100.0, self.last_ts + 0.001)
        for rank in self.ranks:
            rank.seq = 0
            rank.buffer.clear()
        self.start()


class _Rank:
    """One data-parallel rank's KV event publisher."""

    def __init__(self, rank: int, pub: str, replay: str) -> None:
        self.rank = rank  # its data_parallel_rank
        self.pub, self.replay = pub, replay  # its endpoints
        self.seq = 0  # next sequence number
        self.buffer: list[tuple[int, bytes]] = []  # (seq, payload) for replay, as vLLM's deque
        self.thread: _ZmqThread | None = None  # owns its sockets while started

    def start(self) -> None:
        self.thread = _ZmqThread(self.pub, self.replay, self.buffer)

    def stop(self) -> None:
        self.thread.stop()

    def send(self, data: bytes, publish: bool = True) -> None:
        seq, self.seq = self.seq, self.seq + 1
        self.buffer.append((seq, data))
        if publish:
            self.thread.commands.put(("pub", seq, data))


def _with_rank(data: bytes, rank: int) -> bytes:
    """A recorded payload as rank `rank` would have published it."""
    ts, events, *_ = msgspec.msgpack.decode(data)
    return msgspec.msgpack.encode([ts, events, rank])


def _free_ports(count: int) -> int:
    """A port p with p .. p + count - 1 free on 127.0.0.1 (vLLM's ranks publish on consecutive ports)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no run of free ports")


class _ZmqThread:
    """Owns the PUB and ROUTER sockets (ZMQ sockets stay on one thread)."""

    def __init__(self, pub: str, replay: str, buffer: list[tuple[int, bytes]]) -> None:
        self.commands: queue.Queue = queue.Queue()  # ("pub", seq, payload) or ("stop",)
        self._buffer = buffer  # the rank's replay buffer (appended to before each publish command)
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(pub, replay, ready), daemon=True)
        self._thread.start()
        ready.wait(5)

    def stop(self) -> None:
        self.commands.put(("stop",))
        self._thread.join(5)

    def _run(self, pub_endpoint: str, replay_endpoint: str, ready: threading.Event) -> None:
        ctx = zmq.Context.instance()
        pub, router = ctx.socket(zmq.PUB), ctx.socket(zmq.ROUTER)
        for sock, endpoint in ((pub, pub_endpoint), (router, replay_endpoint)):
            sock.setsockopt(zmq.LINGER, 0)
            if endpoint.startswith("ipc://"):
                Path(endpoint.removeprefix("ipc://")).unlink(missing_ok=True)
            sock.bind(endpoint)
        ready.set()
        try:
            while True:
                if router.poll(10):
                    client, _, start = router.recv_multipart()
                    first = int.from_bytes(start, "big")
                    for seq, data in list(self._buffer):
                        if seq >= first:
                            router.send_multipart([client, b"", b"", seq.to_bytes(8, "big"), data])
                    router.send_multipart([client, b"", b"", END_OF_REPLAY, b""])
                try:
                    command = self.commands.get_nowait()
                except queue.Empty:
                    continue
                if command[0] == "stop":
                    return
                _, seq, data = command
                pub.send_multipart([b"", seq.to_bytes(8, "big"), data])
        finally:
            pub.close()
            router.close()


def _handler(fake: FakeVllm):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # a connection per request: stop() really ends the server

        def log_message(self, *args) -> None:  # quiet
            pass

        def _authorized(self) -> bool:
            fake.headers_seen[self.path] = {k.lower(): v for k, v in self.headers.items()}
            if (
                fake.api_key
                and self.path.startswith("/v1")
                and self.headers.get("Authorization") != f"Bearer {fake.api_key}"
            ):
                self._send(401, {"error": "Unauthorized"})
                return False
            return True

        def _send(self, status: int, body, content_type: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the dashboard quit mid-request
                pass

        def _stream(self, events: Iterator[str], delay_s: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for event in events:
                    self.wfile.write((event + "\n\n").encode())
                    self.wfile.flush()
                    time.sleep(delay_s)
            except (BrokenPipeError, ConnectionResetError):  # the client went away: vLLM aborts the request
                fake.aborted += 1

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path == "/health":
                self._send(200, "")
            elif self.path == "/version":
                self._send(200, {"version": fake.version})
            elif self.path == "/v1/models":
                self._send(200, fake.models)
            elif self.path == "/metrics":
                self._send(200, fake.metrics_text(), "text/plain; version=0.0.4")
            elif self.path == "/server_info?config_format=json" and fake.dev_mode_limits:  # VLLM_SERVER_DEV_MODE=1
                seqs, tokens = fake.dev_mode_limits
                self._send(
                    200, {"vllm_config": {"scheduler_config": {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}}}
                )
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self._authorized():
                return
            if self.path == "/reset_prefix_cache":
                fake.reset_cache()
                self._send(200, "")
            elif self.path == "/v1/completions":
                fake.completions.append(body)
                if body.get("max_tokens", 1) < 1:
                    self._send(400, {"error": {"message": "max_tokens must be at least 1", "type": "BadRequestError"}})
                    return
                if fake.echo_model is not None:
                    self._stream(fake.echo_events(body), ECHO_CHUNK_DELAY_S)
                elif not body.get("stream"):
                    self._send(200, fake.whole_completion())
                else:
                    self._stream((e for e in fake.stream.split("\n\n") if e.strip()), STREAM_CHUNK_DELAY_S)
            else:
                self._send(404, {"detail": "Not Found"})

    return Handler
