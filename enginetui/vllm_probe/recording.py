"""`enginetui attach --vllm URL [--probe ADDR] --record FILE`: a vLLM's step events in our engine's recording format
(the probe's, or the outside rebuild's).

The file is core/record's (core/record/format.py, written by its RecordingWriter): `enginetui replay`,
`export` and `simulate --from-recording` read it as they read our engine's. Its header is written with
the first event, which carries vLLM's pool and limits; what the events lack (the model, max_model_len,
prefix caching) comes from vLLM's /v1/models and /metrics when `--vllm URL` is given (`VllmFacts`).
Without them the header says the model is unknown and its max_model_len is 0, which the simulator
refuses in one line.
"""

import json
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.events import SCHEMA_VERSION, StepEvent
from enginetui.core.record import format as fmt
from enginetui.core.record.recorder import RecordingSummary
from enginetui.core.record.recorder import _version as enginetui_version  # the recorder's own
from enginetui.core.record.writer import RecordingWriter

PROBE_DEVICE = "vLLM (probe)"  # a recording's device: the probe's exact events
UNKNOWN_MODEL = "vLLM (model unknown: recorded without --vllm URL)"
# A local model directory's files that rebuild its tokenizer offline (core/record/tokenizer_files.py reads them).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "config.json",
)


@dataclass(frozen=True, slots=True)
class VllmFacts:
    """What vLLM's server says that its probe's events do not (read once, before recording starts)."""

    model: str  # the served model name
    root: str  # its path or hub id
    max_model_len: int | None  # /v1/models
    cache_config: dict[str, str]  # vllm:cache_config_info's labels (enable_prefix_caching, num_gpu_blocks, ...)


async def read_facts(url: str, api_key: str | None) -> VllmFacts:
    """/v1/models and one /metrics reading of the vLLM at `url` (raises vllm_watch's ServerError)."""
    from enginetui.vllm_watch import prometheus as m
    from enginetui.vllm_watch.server import VllmClient

    client = VllmClient(url, api_key)
    try:
        info = await client.models()
        sample = await client.metrics()
    finally:
        await client.close()
    return VllmFacts(info.model, info.root, info.max_model_len, dict(sample.info.get(m.CACHE_CONFIG, {})))


def probe_header(
    first: StepEvent | None,
    source: str,
    facts: VllmFacts | None,
    tokenizer_dir: str | None,
    device: str = PROBE_DEVICE,
) -> fmt.Header:
    """The recording's header: vLLM's pool and limits from the first event, the rest from `facts`."""
    model_dir = Path(tokenizer_dir or (facts.root if facts else ""))
    hf_config = _read_json(model_dir / "config.json") if facts or tokenizer_dir else {}
    max_model_len = (facts.max_model_len if facts else None) or 0
    config: dict = {"max_model_len": max_model_len} if max_model_len else {}
    if first is not None:
        config |= {
            "block_size": first.block_size,
            "max_num_batched_tokens": first.token_budget,
            "max_num_seqs": first.max_num_seqs,
            "async_scheduling": first.async_scheduling,
        }
    if facts is not None and facts.cache_config.get("enable_prefix_caching") in ("True", "False"):
        config["enable_prefix_caching"] = facts.cache_config["enable_prefix_caching"] == "True"
    engine = EngineInfo(
        model_name=facts.model if facts else UNKNOWN_MODEL,
        model_dir=str(model_dir) if facts and model_dir.is_dir() else None,
        architecture=(hf_config.get("architectures") or ["vLLM"])[0],
        num_parameters=0,  # not published by vLLM
        kv_bytes_per_token=0,
        vocab_size=int(hf_config.get("vocab_size") or 0),
        max_model_len=max_model_len,
        num_blocks=first.num_blocks if first else 0,
        block_size=first.block_size if first else 0,
        device=device,
        dtype=str(hf_config.get("torch_dtype") or ""),  # the checkpoint's (vLLM's --dtype is not published)
        eos_token_ids=[],
        default_sampling={},
        pid=0,
    )
    return fmt.Header(
        event_schema_version=SCHEMA_VERSION,
        created=time.time(),
        source=source,
        enginetui_version=enginetui_version(),
        engine=engine,
        config=config,
        # the probe's events carry token ids (the rebuild's none: no text to decode)
        tokenizer=_tokenizer_files(model_dir) if (facts or tokenizer_dir) and device == PROBE_DEVICE else None,
    )


class ProbeRecording:
    """The events a ProbeEngine takes, written as they come (each as the probe published it)."""

    def __init__(
        self,
        path: str | os.PathLike,
        source: str,
        facts: VllmFacts | None,
        tokenizer_dir: str | None,
        device: str = PROBE_DEVICE,
    ) -> None:
        self.path = str(path)  # the recording file
        open(self.path, "wb").close()  # a path that cannot be written fails now, not at vLLM's first step
        self.source = source  # the command line that recorded it
        self.facts = facts  # what vLLM's server said (None: recorded without --vllm URL)
        self.tokenizer_dir = tokenizer_dir  # --tokenizer DIR (None: the served model's directory, when local)
        self.device = device  # the header's: whose events (the probe's exact ones, or the rebuild's)
        self.missed_events = 0  # seq gaps: events the probe dropped for this subscriber
        self._last_seq: int | None = None
        self._writer: RecordingWriter | None = None  # opened with the first event (its header needs it)
        self._vllm_before: list[bytes] = []  # what vLLM added before the first event, written with it
        self._summary: RecordingSummary | None = None  # once closed

    def write(self, data: bytes, event: StepEvent) -> None:
        """One event taken from the probe: `data` as published, `event` decoded from it."""
        if self._summary is not None:
            return
        writer = self._writer or self._open(event)
        if self._last_seq is not None and event.seq > self._last_seq + 1:
            self.missed_events += event.seq - self._last_seq - 1
        self._last_seq = event.seq
        writer.write_event(data)

    def write_vllm(self, payload: bytes) -> None:
        """What the vLLM added (a /metrics reading, a KV batch, a proxied request's change: vllm_watch/vllm_record.py)."""
        if self._summary is not None:
            return
        if self._writer is None:
            self._vllm_before.append(payload)
        else:
            self._writer.write_vllm(payload)

    def _open(self, first: StepEvent | None) -> RecordingWriter:
        header = probe_header(first, self.source, self.facts, self.tokenizer_dir, self.device)
        self._writer = writer = RecordingWriter(self.path, header)
        for payload in self._vllm_before:
            writer.write_vllm(payload)
        self._vllm_before.clear()
        return writer

    def close(self) -> RecordingSummary:
        """The trailer (a header alone when no event came); idempotent."""
        if self._summary is None:
            writer = self._writer or self._open(None)
            writer.close(self.missed_events)
            self._summary = RecordingSummary(
                self.path, writer.num_events, self.missed_events, os.path.getsize(self.path)
            )
        return self._summary


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tokenizer_files(folder: Path) -> fmt.TokenizerFiles | None:
    """The tokenizer files of a local model directory, packed as core/record packs a tokenizer (None: none here)."""
    files = {
        name: zlib.compress((folder / name).read_bytes(), 6) for name in TOKENIZER_FILES if (folder / name).is_file()
    }
    if not any(name.startswith("tokenizer") or name == "vocab.json" for name in files):
        return None
    return fmt.TokenizerFiles(files=files)
