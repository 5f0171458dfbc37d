"""The vLLM server's HTTP side: /v1/models, /metrics, streamed /v1/completions, /reset_prefix_cache;
and the served model's tokenizer, when it is on this machine."""

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import httpx

from enginetui.openai_client import (
    USAGE_EVERY_CHUNK,
    InvalidRequest,
    StreamError,
    auth_headers,
    choice_text,
    error_message,
    stream_chunks,
    usage_tokens,
)
from enginetui.settings import SamplingSettings
from enginetui.vllm_watch.prefix_tree import Decode
from enginetui.vllm_watch.prometheus import MetricsSample, parse_metrics
from enginetui.vllm_watch.state import ServerInfo

TIMEOUT_S = 5.0  # connect / read timeout of /metrics and /v1/models


class ServerError(RuntimeError):
    """The server could not be reached, refused us, or is not a vLLM server."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One streamed piece of a completion."""

    text: str  # new text
    prompt_tokens: int | None  # vLLM's usage (continuous usage stats): the prompt's length
    output_tokens: int | None  # tokens generated so far
    finish_reason: str | None  # stop | length | abort ... on the last chunk


class VllmClient:
    """HTTP calls to one vLLM OpenAI server (opened in the app's event loop)."""

    def __init__(self, url: str, api_key: str | None) -> None:
        self.url = url.rstrip("/")  # http://HOST:PORT
        self.headers = auth_headers(api_key)  # sent on every call
        self.http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=TIMEOUT_S)

    async def models(self) -> ServerInfo:
        """The served model (/v1/models)."""
        data = (await self._get("/v1/models")).json()
        try:
            card = data["data"][0]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"{self.url}/v1/models lists no model: is this a vLLM server?") from None
        return ServerInfo(
            model=card["id"], root=card.get("root") or card["id"], max_model_len=card.get("max_model_len")
        )

    async def scheduler_limits(self) -> tuple[int, int] | None:
        """(max_num_seqs, max_num_batched_tokens) from /server_info, which vLLM serves in dev mode
        (VLLM_SERVER_DEV_MODE=1) with its whole config; None where it has no such route."""
        r = await self._fetch("/server_info", config_format="json")
        if r.status_code != 200:
            return None
        try:
            config = r.json()["vllm_config"]["scheduler_config"]
            return int(config["max_num_seqs"]), int(config["max_num_batched_tokens"])
        except (ValueError, KeyError, TypeError):
            return None

    async def metrics(self) -> MetricsSample:
        """One reading of /metrics."""
        r = await self._get("/metrics")
        try:
            return parse_metrics(r.text, time.time())
        except ValueError as exc:
            raise ServerError(f"{self.url}/metrics is not Prometheus text ({exc})") from exc

    async def complete(
        self, model: str, prompt: str, settings: SamplingSettings, *, via: str | None = None, request_id: str = ""
    ) -> AsyncIterator[Chunk]:
        """Stream one completion (through the proxy at `via`, else straight from the server; `request_id`:
        vLLM's name for it). A request the server refuses raises ValueError with its message (an
        openai_client.InvalidRequest), any other failure ServerError."""
        body: dict = {
            "model": model,
            "prompt": prompt,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "stream": True,
            "stream_options": USAGE_EVERY_CHUNK,
        }
        if settings.top_k:
            body["top_k"] = settings.top_k
        if settings.seed is not None:
            body["seed"] = settings.seed
        if settings.stop:
            body["stop"] = list(settings.stop)
        if settings.ignore_eos:
            body["ignore_eos"] = True  # vLLM's extension of the OpenAI API
        if request_id:
            body["request_id"] = request_id  # vLLM's extension too
        chunks = stream_chunks(via or self.url, "/v1/completions", body, self.headers, TIMEOUT_S)
        try:
            async with aclosing(chunks):
                async for data in chunks:
                    prompt_tokens, output_tokens = usage_tokens(data)
                    for choice in data.get("choices") or []:
                        yield Chunk(choice_text(choice), prompt_tokens, output_tokens, choice.get("finish_reason"))
        except InvalidRequest:
            raise
        except StreamError as exc:
            raise ServerError(str(exc)) from exc

    async def reset_prefix_cache(self) -> None:
        """Empty the prefix cache (a dev-mode route: vLLM serves it with VLLM_SERVER_DEV_MODE=1)."""
        try:
            r = await self.http.post("/reset_prefix_cache")
        except httpx.HTTPError as exc:
            raise ServerError(f"cannot reach {self.url}: {_network_error(exc)}") from exc
        if r.status_code == 404:
            raise ServerError("this vLLM has no /reset_prefix_cache: start it with VLLM_SERVER_DEV_MODE=1")
        if r.status_code >= 400:
            raise ServerError(f"/reset_prefix_cache: HTTP {r.status_code}: {_error_message(r)}")

    async def close(self) -> None:
        await self.http.aclose()

    async def _fetch(self, path: str, **params: str) -> httpx.Response:
        """GET `path`, whatever its status; ServerError when the server cannot be reached."""
        try:
            try:
                return await self.http.get(path, params=params)
            except httpx.RemoteProtocolError:  # a kept-alive connection the server closed as it was reused
                return await self.http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise ServerError(f"cannot reach {self.url}: {_network_error(exc)}") from exc

    async def _get(self, path: str) -> httpx.Response:
        r = await self._fetch(path)
        if r.status_code == 401:
            raise ServerError(f"{self.url} wants an API key: pass --api-key KEY")
        if r.status_code == 404:
            raise ServerError(f"{self.url} has no {path}: is this a vLLM server?")
        if r.status_code >= 400:
            raise ServerError(f"{self.url}{path}: HTTP {r.status_code}: {_error_message(r)}")
        return r


def load_decoder(source: str) -> tuple[Decode | None, str]:
    """A decode function for the tokenizer at `source` (a local directory, or a hub id already in
    the local Hugging Face cache), and where it came from in words; (None, why) when there is none
    here. Never downloads. A directory with a `tokenizer.json` is read with `tokenizers` alone
    (transformers, which loads torch, is not imported: the watcher stays light)."""
    path = Path(source)
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        try:
            fast = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # a damaged file means: no tokenizer here
            return None, f"{path / 'tokenizer.json'} cannot be read ({exc}): blocks show token ids"
        return (
            lambda token_ids: fast.decode(list(token_ids), skip_special_tokens=False)
        ), f"tokens decoded with {source}'s tokenizer"
    if not path.is_absolute() and (len(path.parts) > 1 or source.startswith(".")) and not path.exists():
        return None, (
            f"the model path {source!r} is relative to vLLM's working directory, not found here: "
            "blocks show token ids; pass --tokenizer DIR to decode them"
        )
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception as exc:  # any loading failure means: no tokenizer here
        where = "no such directory here" if path.is_absolute() and not path.exists() else str(exc).split("\n")[0]
        return None, f"no tokenizer for {source} on this machine ({where}): blocks show token ids; pass --tokenizer DIR"

    def decode(token_ids) -> str:
        return tokenizer.decode(list(token_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)  # type: ignore[return-value]  # one sequence is one str

    return decode, f"tokens decoded with {source}'s tokenizer"


def _network_error(exc: httpx.HTTPError) -> str:
    """An httpx failure in words."""
    if isinstance(exc, httpx.ConnectError) and "All connection attempts failed" in str(exc):
        return "nothing listens there (is vLLM running? it answers once its model is loaded)"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {TIMEOUT_S:.0f} s"
    return str(exc) or type(exc).__name__


def _error_message(r: httpx.Response) -> str:
    return error_message(r.content) if r.content else r.reason_phrase
