"""LLM: the offline facade, `LLM(model=...).generate(prompts, params)`."""

import os
from collections.abc import Sequence

from enginetui.core.config import offline_config
from enginetui.core.engine.llm_engine import LLMEngine
from enginetui.core.engine.processor import PromptType
from enginetui.core.outputs import RequestOutput
from enginetui.core.record.recorder import Recorder, RecordingSummary, start_recording
from enginetui.core.sampling_params import SamplingParams


class LLM:
    """Builds an engine from keyword arguments named like vLLM's and runs batches to completion."""

    def __init__(
        self,
        model: str | None = None,
        *,
        multiprocess: bool | None = None,
        record: str | os.PathLike | None = None,
        **engine_args,
    ) -> None:
        """`record`: write every step event of this engine to that file (a recording: see
        `enginetui replay`); it is complete after each generate() and closed by shutdown()."""
        self.config = offline_config(model=model, **engine_args)  # validated configuration
        self.engine = LLMEngine(self.config, multiprocess=multiprocess)  # the client-side engine
        self._counter = 0  # next request id
        self.recorder: Recorder | None = None  # writes the recording, when asked for
        if record is not None:
            try:
                self.recorder = start_recording(record, self.engine.client, self.engine.tokenizer, source="LLM")
            except BaseException:
                self.engine.shutdown()
                raise

    def get_tokenizer(self):
        return self.engine.tokenizer

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix; False (nothing done) while requests hold KV blocks."""
        return self.engine.reset_prefix_cache()

    def generate(
        self,
        prompts: PromptType | Sequence[PromptType],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
        priority: Sequence[int] | None = None,
    ) -> list[RequestOutput]:
        """Run every prompt to completion; outputs come back in prompt order.

        A prompt is text, a list of token ids, {"prompt": text} or {"prompt_token_ids": [...]};
        `prompts` is one prompt or a list of them.
        """
        prompts = _as_prompt_list(prompts)
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params] * len(prompts)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompts):
                raise ValueError(f"got {len(params_list)} sampling params for {len(prompts)} prompts")
        if priority is not None and len(priority) != len(prompts):
            raise ValueError(f"got {len(priority)} priorities for {len(prompts)} prompts")
        ids = []
        try:
            for i, (prompt, params) in enumerate(zip(prompts, params_list)):
                request_id = f"req-{self._counter}"
                self._counter += 1
                self.engine.add_request(request_id, prompt, params, priority[i] if priority else 0)
                ids.append(request_id)
        except Exception:
            self.engine.abort_request(ids)
            self._drain(set(ids), use_tqdm=False)
            raise
        finished = self._drain(set(ids), use_tqdm)
        if self.recorder is not None:  # the recording holds this batch before we return
            self.recorder.sync(self.engine.snapshot().seq)
        return [finished[i] for i in ids]

    def _drain(self, ids: set[str], use_tqdm: bool) -> dict[str, RequestOutput]:
        finished: dict[str, RequestOutput] = {}
        bar = None
        if use_tqdm and len(ids) > 1:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(ids), desc="Processed prompts", dynamic_ncols=True)
        try:
            while len(finished) < len(ids) and self.engine.has_unfinished_requests():
                for out in self.engine.step():
                    if out.finished and out.request_id in ids:
                        finished[out.request_id] = out
                        if bar is not None:
                            bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        return finished

    def stop_recording(self) -> RecordingSummary | None:
        """Close the recording (every event so far is in it); None when not recording."""
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return None
        try:
            latest = self.engine.snapshot().seq
        except Exception:  # the engine is gone: keep what arrived
            latest = None
        return recorder.close(latest)

    def shutdown(self) -> None:
        self.stop_recording()
        self.engine.shutdown()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def _as_prompt_list(prompts) -> list:
    """One prompt (text, token ids or a prompt dict) or a sequence of them -> a list of prompts."""
    if isinstance(prompts, (str, dict)) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
        return [prompts]
    if not isinstance(prompts, (list, tuple)):
        raise ValueError(
            f"prompts must be a prompt (a string, a list of token ids, a prompt dict) or a list of "
            f"prompts; got {type(prompts).__name__}"
        )
    return list(prompts)
