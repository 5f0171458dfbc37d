"""Requests as the watcher sees them: passed through its proxy on their way to vLLM.

A request is known from what crosses the wire: its body (route, model, prompt, max_tokens,
stream), the response's status, and the response itself, read as it passes: server-sent events
(one `data: {...}` per chunk; vLLM's `usage` on every chunk with continuous usage stats, or on a
last one) or one JSON body. Every time on a request is when the proxy saw that byte go by.

Pure Python: the folding is unit-tested directly.
"""

import json
import re
from dataclasses import dataclass, field

from enginetui.openai_client import DONE, SseReader, choice_text, error_message, usage_tokens

GENERATION_ROUTES = ("/v1/completions", "/v1/chat/completions")  # routes whose responses carry generated text
ACTIVE = ("sent", "streaming")  # statuses of a request still under way
OWN_PREFIX = "enginetui-"  # a dashboard's own prompts carry request_id enginetui-rN (vLLM's name): listed as rN
# vLLM's engine id of such a prompt: cmpl-enginetui-rN-0 (the prompt's index), then 8 random characters (0.32)
OWN_VLLM_ID = re.compile(rf"(?:chat)?cmpl-{OWN_PREFIX}(r\d+)(?:-\d+)?(?:-[0-9a-f]{{8}})?")


def own_name_in_vllm(vllm_id: str) -> str:
    """The dashboard's name (rN) of its own prompt from vLLM's engine id for it, else ""."""
    match = OWN_VLLM_ID.fullmatch(vllm_id)
    return match[1] if match else ""


@dataclass(slots=True)
class WatchedRequest:
    """One request: its body, its response so far, and when each part went by."""

    req_id: str  # p1, p2, ... in the order they came through the proxy
    index: int  # order of arrival (its colour)
    source: str  # the client's address (HOST:PORT)
    method: str  # GET | POST | ...
    route: str  # the path, e.g. /v1/completions
    arrival: float  # when the proxy received it (time.time())
    prompt: str = ""  # the prompt (a chat's last message), or the path and query for other routes
    model: str | None = None  # the model asked for
    max_tokens: int | None = None  # the generation limit asked for (None: the server's default)
    stream: bool = False  # asked for server-sent events
    client_id: str = ""  # the body's request_id (vLLM's name for it; "": none given)
    status: str = "sent"  # sent | streaming | finished | aborted | error | rejected
    http_status: int | None = None  # the response's status code (None: none yet)
    responded: float | None = None  # when the response's status line went by (None: not yet)
    first_token: float | None = None  # when the first generated text went by
    last_token: float | None = None  # when the latest generated text went by
    token_chunks: int = (
        0  # chunks that carried generated tokens (one or more; the text may be empty: a character cut in two)
    )
    token_times: list[float] = field(
        default_factory=list
    )  # when each generated token went by, by vLLM's usage count per chunk (without usage: one per chunk)
    prompt_tokens: int | None = None  # vLLM's usage: prompt length (None: not reported)
    output_tokens: int | None = None  # vLLM's usage: tokens generated (None: not reported)
    text: str = ""  # the generated text so far
    finish_reason: str | None = None  # stop | length | abort ... (None: not yet)
    detail: str = ""  # an error's message, or why it ended early
    finished: float | None = None  # when the response ended
    rebuilt_preemptions: int = (
        0  # times vLLM preempted it, as the scheduler rebuild has it (sched_rebuild.py; not on the wire)
    )
    _events: SseReader = field(default_factory=SseReader, repr=False)  # an event stream, read as it goes by
    _body: bytes = field(default=b"", repr=False)  # a JSON response's bytes so far

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def own_name(self) -> str:
        """The name a dashboard gave its own prompt (rN: the dashboard's request), else ""."""
        return self.client_id.removeprefix(OWN_PREFIX) if self.client_id.startswith(OWN_PREFIX) else ""

    @property
    def generates(self) -> bool:
        """A completion or chat request (its response is read)."""
        return self.route in GENERATION_ROUTES

    def ttft(self) -> float | None:
        """Seconds from arrival to the first generated text (queue time and prefill included)."""
        return None if self.first_token is None else self.first_token - self.arrival

    def itl(self) -> float | None:
        """Mean seconds per token after the first: from the first chunk's arrival to the last's over
        the tokens between, as vLLM's usage counts them; without usage, per chunk (vLLM merges
        tokens into one chunk when its client reads slower than it generates: then an upper
        bound). None with fewer than two."""
        if self.first_token is None or self.last_token is None:
            return None
        steps = (self.output_tokens if self.output_tokens is not None else self.token_chunks) - 1
        return (self.last_token - self.first_token) / steps if steps > 0 else None

    def tokens(self) -> int | None:
        """Tokens generated, as vLLM's usage reports them (None: the client asked for no usage; the
        chunks are no count: vLLM merges tokens into one chunk when its client reads slowly)."""
        return self.output_tokens

    def tokens_text(self) -> str:
        """The tokens generated in words: `24 tok`, or `17 chunks` without usage."""
        if self.output_tokens is not None:
            return f"{self.output_tokens} tok"
        return f"{self.token_chunks} chunk{'s' if self.token_chunks != 1 else ''}"

    # ---- the request -------------------------------------------------------------------------

    def read_body(self, body: bytes) -> None:
        """The request body: model, prompt, limits (other routes keep their path as the prompt)."""
        if not self.generates:
            return
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        self.model = data.get("model") if isinstance(data.get("model"), str) else None
        limit = data.get("max_tokens", data.get("max_completion_tokens"))
        self.max_tokens = limit if isinstance(limit, int) else None
        self.stream = bool(data.get("stream"))
        self.prompt = prompt_text(data)
        self.client_id = data["request_id"] if isinstance(data.get("request_id"), str) else ""

    # ---- the response ------------------------------------------------------------------------

    @property
    def handed_over(self) -> float | None:
        """About when vLLM's API server handed the request to its engine (None: not yet). vLLM sends a
        response's status line when it starts the response, and then adds the request to its engine; under a
        burst that comes well after the request reached the proxy (its API server takes requests in a few
        at a time)."""
        return self.responded

    def respond(self, http_status: int, when: float) -> None:
        """The response's status line arrived."""
        self.http_status, self.responded = http_status, when
        if http_status < 400:
            self.status = "streaming"

    def read(self, data: bytes, when: float) -> None:
        """Response bytes as they went by (an event stream is read event by event)."""
        if not self.generates or (self.http_status or 0) >= 400:
            self._body += data
            return
        if not self.stream:
            self._body += data
            return
        for event in self._events.feed(data):
            if event != DONE:
                self._chunk(event, when)

    def end(self, when: float, error: str = "") -> None:
        """The response ended (or broke with `error`, or the client went away: "abort")."""
        if not self.active:
            return
        self.finished = when
        if error == "abort":
            self.status, self.finish_reason, self.detail = "aborted", "abort", "the client closed the connection"
            return
        if error:
            self.status, self.detail = "error", error
            return
        if self.http_status is not None and self.http_status >= 400:
            self.status = "rejected" if self.http_status < 500 else "error"
            self.detail = f"HTTP {self.http_status}: {error_message(self._body)}"
            return
        if self.generates and not self.stream:
            self._whole(when)
        if self.generates and self.finish_reason is None and self.status != "error":
            self.status, self.detail = "error", self.detail or "the response ended without a finish reason"
            return
        if self.status != "error":
            self.status = "finished"

    def _chunk(self, payload: bytes, when: float) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if "error" in data:
            self.status, self.detail = "error", error_message(payload)
            return
        self._usage(data)
        for choice in data.get("choices") or []:
            text = choice_text(choice)
            if text or "text" in choice or (choice.get("delta") or {}).get("content") is not None:
                self.text += text
                self.token_chunks += 1
                self.first_token = self.first_token or when
                self.last_token = when
                self.tokens_seen(when)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def tokens_seen(self, when: float) -> None:
        """A chunk of generated tokens went by at `when`: as many as vLLM's usage count grew (one
        without usage)."""
        new = 1 if self.output_tokens is None else self.output_tokens - len(self.token_times)
        self.token_times.extend([when] * max(new, 0))

    def _whole(self, when: float) -> None:
        """A JSON response: its text and usage, all at once (its first token's time is unknown)."""
        try:
            data = json.loads(self._body or b"{}")
        except ValueError:
            self.status, self.detail = "error", "the response is not JSON"
            return
        self._usage(data)
        for choice in data.get("choices") or []:
            self.text += choice_text(choice)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        self.last_token = when

    def _usage(self, data: dict) -> None:
        prompt_tokens, output_tokens = usage_tokens(data)
        self.prompt_tokens = self.prompt_tokens if prompt_tokens is None else prompt_tokens
        self.output_tokens = self.output_tokens if output_tokens is None else output_tokens


def prompt_text(body: dict) -> str:
    """A completion's prompt, or a chat's last message, as text (token ids are shown as such)."""
    if "messages" in body:
        messages = body.get("messages") or []
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        content = last.get("content", "")
        if isinstance(content, list):  # content parts: their text
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return " | ".join(str(p) for p in prompt) if prompt and not isinstance(prompt[0], int) else str(prompt)
    return str(prompt)
