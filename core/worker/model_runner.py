"""The model runner: applies SchedulerOutput deltas to the persistent batch, packs the step's tokens
into flat tensors, runs the model under the forward context (a decode step replays a captured CUDA
graph where one fits: core/worker/cuda_graphs.py), and samples."""

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from enginetui.core.ceil_div import cdiv
from enginetui.core.config import EngineConfig
from enginetui.core.models.contract import CausalLM
from enginetui.core.outputs import Logprob
from enginetui.core.sample.metadata import SamplingMetadata
from enginetui.core.sample.sampler import Sampler
from enginetui.core.sched.output import SchedulerOutput
from enginetui.core.worker.cuda_graphs import CudaGraph, DecodeGraphs, GraphSetup, StaticDecodeBuffers, graph_plan
from enginetui.core.worker.forward_context import AttentionMetadata, PromptSplit, set_forward_context
from enginetui.core.worker.input_batch import InputBatch
from enginetui.kernels import prompt_sdpa, select_backend
from enginetui.kernels.dispatch import PROMPT_SDPA_MIN_TOKENS

log = logging.getLogger("enginetui.model_runner")


@dataclass(slots=True)
class PackedInputs:
    """One step's flat, unpadded model inputs."""

    req_ids: list[str]  # requests in packing order
    input_ids: torch.Tensor  # [num_tokens] token ids
    positions: torch.Tensor  # [num_tokens] position of each token in its own request
    attn: AttentionMetadata  # slot_mapping, query_start_loc, seq_lens, block_table
    logits_indices: torch.Tensor  # [num_logits] rows of the hidden states that need logits
    logits_rows: list[int]  # batch rows (InputBatch) of those logits, in order


@dataclass(slots=True)
class ModelRunnerOutput:
    """What one step's execution produced."""

    sampled: dict[str, int]  # request id -> sampled token (only requests that reached their last token)
    logprobs: dict[str, list[Logprob]]  # request id -> sampled + top-N logprobs (only if asked)
    forward_ms: float  # model forward + lm_head
    sample_ms: float  # sampling
    prepare_ms: float  # applying deltas and packing inputs
    compute_threads: int = 0  # CPU threads its operators ran on (torch.get_num_threads(); 0 on CUDA)
    cuda_graph_size: int = 0  # the captured decode size its forward replayed (0: ran eagerly)


def compute_threads(device: torch.device) -> int:
    """The CPU threads the calling thread's operators run on (the thread governor may have changed
    them); 0 for a model that does not run on a CPU."""
    return torch.get_num_threads() if device.type == "cpu" else 0


class ModelRunner:
    """Owns the model, its paged KV cache and the persistent input batch."""

    def __init__(
        self,
        model: CausalLM,
        num_blocks: int,
        block_size: int,
        max_num_reqs: int,
        max_model_len: int,
        dtype: torch.dtype,
        device: torch.device,
        seed: int,
    ) -> None:
        self.model = model  # e.g. OPTForCausalLM
        self.device = device  # where tensors live
        self.block_size = block_size  # tokens per KV block
        self.batch = InputBatch(max_num_reqs, max_model_len, cdiv(max_model_len, block_size))  # persistent rows
        self.sampler = Sampler(seed, device)  # token selection
        layers = model.attention_layers()
        first = layers[0]
        # One tensor holds every layer's K and V pages.
        self.kv_cache = torch.zeros(
            (len(layers), 2, num_blocks, block_size, first.num_kv_heads, first.head_size), dtype=dtype, device=device
        )  # [num_layers, 2, num_blocks, block_size, num_kv_heads, head_size]
        for i, layer in enumerate(layers):
            layer.bind_kv_cache(self.kv_cache[i, 0], self.kv_cache[i, 1])
        # Chosen once, now: the env var is read here, and the C++ kernels are built (or loaded) while
        # the engine starts, not inside its first request.
        self.attention_backend = select_backend(device)  # kernels.dispatch.BACKENDS
        self.prompt_sdpa = prompt_sdpa(device, dtype, self.attention_backend)  # whole prompts apart (PromptSplit)
        log.info("attention backend: %s, whole prompts by SDPA: %s", self.attention_backend, self.prompt_sdpa)
        self.graphs: DecodeGraphs | None = None  # captured decode forwards (setup_cuda_graphs)

    def setup_cuda_graphs(self, config: EngineConfig) -> GraphSetup:
        """Capture the decode forward for the configured sizes, if this engine can (core/worker/cuda_graphs.py)."""
        plan = graph_plan(config, self.device, self.attention_backend)
        return self.capture_cuda_graphs(plan.sizes) if plan.sizes else plan

    def capture_cuda_graphs(self, sizes: list[int], graph_cls: type = CudaGraph) -> GraphSetup:
        """Capture the decode forward at each of `sizes` (`graph_cls`: cuda_graphs.EagerReplay without CUDA)."""
        buffers = StaticDecodeBuffers(max(sizes), self.batch.block_table.shape[1], self.device)
        self.graphs = DecodeGraphs(self.model, buffers, self.attention_backend)
        seconds = self.graphs.capture(sizes, graph_cls)
        log.info("captured %d decode CUDA graphs (%d-%d) in %.2f s", len(sizes), min(sizes), max(sizes), seconds)
        return GraphSetup(self.graphs.sizes, seconds)

    def update_states(self, out: SchedulerOutput) -> None:
        """Apply the plan's deltas: drop finished / preempted requests, add new ones, extend cached ones."""
        for req_id in sorted(out.finished_req_ids | out.preempted_req_ids):  # sorted: rows never depend on hashing
            self.batch.remove(req_id)
        for new in out.scheduled_new_reqs:
            self.batch.remove(new.req_id)
            self.batch.add(
                new.req_id,
                new.token_ids,
                new.num_prompt_tokens,
                new.sampling_params,
                new.eos_token_ids,
                new.block_ids,
                new.num_computed_tokens,
            )
        cached = out.scheduled_cached_reqs
        for req_id, tokens, blocks, computed in zip(
            cached.req_ids, cached.new_token_ids, cached.new_block_ids, cached.num_computed_tokens
        ):
            row = self.batch.index[req_id]
            self.batch.append_tokens(row, tokens)
            self.batch.append_blocks(row, blocks)
            self.batch.num_computed_tokens[row] = computed

    def prepare_inputs(self, out: SchedulerOutput) -> PackedInputs:
        """Pack the scheduled tokens of every request into flat tensors (no padding)."""
        b = self.batch
        req_ids = [r for r in b.req_ids if r in out.num_scheduled_tokens]  # row order
        rows = np.array([b.index[r] for r in req_ids], dtype=np.int64)  # [num_reqs]
        num_sched = np.array([out.num_scheduled_tokens[r] for r in req_ids], dtype=np.int64)  # [num_reqs]
        cu = np.cumsum(num_sched)  # [num_reqs]
        num_tokens = int(cu[-1])
        tok_rows = np.repeat(rows, num_sched)  # [num_tokens] batch row of each token
        offsets = np.arange(num_tokens) - np.repeat(cu - num_sched, num_sched)  # [num_tokens] index in its chunk
        positions = b.num_computed_tokens[tok_rows] + offsets  # [num_tokens]
        input_ids = b.token_ids[tok_rows, positions]  # [num_tokens]
        block_ids = b.block_table[tok_rows, positions // self.block_size]  # [num_tokens]
        slot_mapping = block_ids * self.block_size + positions % self.block_size  # [num_tokens]
        computed = b.num_computed_tokens[rows]  # [num_reqs]
        seq_lens = computed + num_sched  # [num_reqs]
        max_blocks = int(cdiv(int(seq_lens.max()), self.block_size))
        block_table = b.block_table[rows, :max_blocks]  # [num_reqs, max_blocks]
        query_start_loc = np.concatenate([[0], cu])  # [num_reqs + 1]
        complete = seq_lens == b.num_tokens[rows]  # [num_reqs] reached the last known token: sample
        logits_indices = (cu - 1)[complete]  # [num_logits]
        split = None
        if self.prompt_sdpa:
            split = self._prompt_split(computed, num_sched, cu, seq_lens, block_table, slot_mapping)
        return PackedInputs(
            req_ids=req_ids,
            input_ids=self._to_device(input_ids, torch.long),
            positions=self._to_device(positions, torch.long),
            attn=AttentionMetadata(
                slot_mapping=self._to_device(slot_mapping, torch.long),
                query_start_loc=self._to_device(query_start_loc, torch.int32),
                seq_lens=self._to_device(seq_lens, torch.int32),
                block_table=self._to_device(block_table, torch.int32),
                backend=self.attention_backend,
                max_query_len=int(num_sched.max()),
                prompt_split=split,
            ),
            logits_indices=self._to_device(logits_indices, torch.long),
            logits_rows=rows[complete].tolist(),
        )

    def _to_device(self, a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device=self.device, dtype=dtype)

    def _prompt_split(
        self,
        computed: np.ndarray,
        num_sched: np.ndarray,
        cu: np.ndarray,
        seq_lens: np.ndarray,
        block_table: np.ndarray,
        slot_mapping: np.ndarray,
    ) -> PromptSplit | None:
        """The step's prompts computed from their first token, of PROMPT_SDPA_MIN_TOKENS or more, apart from the
        rest of its requests (arrays per request, as prepare_inputs packs them); None when there is none."""
        whole = (computed == 0) & (num_sched >= PROMPT_SDPA_MIN_TOKENS)  # [num_reqs]
        if not whole.any():
            return None
        starts = cu - num_sched  # [num_reqs] first token of each request
        spans = list(zip(starts[whole].tolist(), cu[whole].tolist()))
        rest = ~whole
        if not rest.any():
            return PromptSplit(spans, slice(0, 0), None)
        rest_sched = num_sched[rest]  # [num_rest]
        rest_cu = np.cumsum(rest_sched)  # [num_rest]
        num_rest = int(rest_cu[-1])
        # [num_rest_tokens] each rest token's index in the step
        tokens = np.repeat(starts[rest] - (rest_cu - rest_sched), rest_sched) + np.arange(num_rest)
        contiguous = int(tokens[-1]) - int(tokens[0]) + 1 == num_rest
        rest_seq_lens = seq_lens[rest]
        max_blocks = int(cdiv(int(rest_seq_lens.max()), self.block_size))
        meta = AttentionMetadata(
            slot_mapping=self._to_device(slot_mapping[tokens], torch.long),
            query_start_loc=self._to_device(np.concatenate([[0], rest_cu]), torch.int32),
            seq_lens=self._to_device(rest_seq_lens, torch.int32),
            block_table=self._to_device(block_table[rest, :max_blocks], torch.int32),
            backend=self.attention_backend,
            max_query_len=int(rest_sched.max()),
        )
        rest_tokens = (
            slice(int(tokens[0]), int(tokens[0]) + num_rest) if contiguous else self._to_device(tokens, torch.long)
        )
        return PromptSplit(spans, rest_tokens, meta)

    @torch.inference_mode()
    def execute(self, out: SchedulerOutput) -> ModelRunnerOutput:
        """Run one step of the plan: forward over the packed tokens, lm_head on logits rows, sample."""
        t0 = time.perf_counter()
        self.update_states(out)
        if out.total_num_scheduled_tokens == 0:
            return ModelRunnerOutput({}, {}, 0.0, 0.0, (time.perf_counter() - t0) * 1e3, compute_threads(self.device))
        inputs = self.prepare_inputs(out)
        t1 = time.perf_counter()
        graphs = self.graphs
        graph_size = graphs.size_for(len(inputs.input_ids), len(inputs.req_ids)) if graphs is not None else None
        if graphs is not None and graph_size is not None:
            hidden = graphs.run(inputs.input_ids, inputs.positions, inputs.attn, graph_size)  # [num_tokens, hidden]
        else:
            with set_forward_context(inputs.attn):
                hidden = self.model(inputs.input_ids, inputs.positions)  # [num_tokens, hidden]
        logits = self.model.compute_logits(hidden[inputs.logits_indices])  # [num_logits, vocab]
        if logits.is_cuda:
            torch.cuda.synchronize(logits.device)  # the forward ran asynchronously: time it, not its launch
        t2 = time.perf_counter()
        sampled_ids: dict[str, int] = {}
        logprobs: dict[str, list[Logprob]] = {}
        if inputs.logits_rows:
            meta = self._sampling_metadata(inputs.logits_rows, logits.shape[-1])
            tokens, lps = self.sampler(logits, meta)
            for i, row in enumerate(inputs.logits_rows):
                req_id = self.batch.req_ids[row]
                sampled_ids[req_id] = tokens[i]
                # The runner keeps its own sampled tokens, so a step planned before this one's tokens
                # reach the scheduler (asynchronous scheduling) reads them here; the scheduler never resends them.
                self.batch.append_tokens(row, [tokens[i]])
                wanted = self.batch.params[row].logprobs
                if lps is not None and wanted is not None:
                    logprobs[req_id] = lps[i][: 1 + wanted]
        t3 = time.perf_counter()
        return ModelRunnerOutput(
            sampled_ids,
            logprobs,
            (t2 - t1) * 1e3,
            (t3 - t2) * 1e3,
            (t1 - t0) * 1e3,
            compute_threads(self.device),
            graph_size or 0,
        )

    def _sampling_metadata(self, rows: list[int], vocab: int) -> SamplingMetadata:
        b = self.batch
        params = [b.params[r] for r in rows]
        dev = self.device

        def column(values, dtype, neutral):
            return None if all(v == neutral for v in values) else torch.tensor(values, dtype=dtype, device=dev)

        top_k = [p.top_k if p.top_k > 0 else vocab for p in params]
        penalized = any(p.presence_penalty or p.frequency_penalty or p.repetition_penalty != 1.0 for p in params)
        num_out = [int(b.num_tokens[r] - b.num_prompt_tokens[r]) for r in rows]
        blocked = []
        for p, n, r in zip(params, num_out, rows):
            ids = []
            if n < p.min_tokens:
                ids = list(p.stop_token_ids or [])
                if not p.ignore_eos:
                    ids.extend(b.eos_ids[r])
            blocked.append(ids)
        wanted = [p.logprobs for p in params if p.logprobs is not None]
        temperature = torch.tensor([p.temperature for p in params], dtype=torch.float32)  # [num_rows], host
        return SamplingMetadata(
            temperature=temperature.to(dev),
            top_k=column(top_k, torch.long, vocab),
            top_p=column([p.top_p for p in params], torch.float32, 1.0),
            min_p=column([p.min_p for p in params], torch.float32, 0.0),
            seeds=[p.seed for p in params],
            num_output_tokens=num_out,
            presence_penalty=torch.tensor([p.presence_penalty for p in params], device=dev) if penalized else None,
            frequency_penalty=torch.tensor([p.frequency_penalty for p in params], device=dev) if penalized else None,
            repetition_penalty=torch.tensor([p.repetition_penalty for p in params], device=dev) if penalized else None,
            output_token_ids=[b.output_tokens(r) for r in rows] if penalized else [[] for _ in rows],
            prompt_token_ids=[b.prompt_tokens(r) for r in rows] if penalized else [[] for _ in rows],
            min_tokens_blocked=blocked,
            max_num_logprobs=max(wanted) if wanted else None,
            greedy=(temperature == 0).tolist(),  # the sampler's branches, without reading the device
        )
