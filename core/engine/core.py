"""EngineCore: the scheduler, the model runner and the step loop body, in whichever process runs it."""

import logging
import time

import torch

from core.config import EngineConfig
from core.engine.events import SCHEMA_VERSION, Preemption, RequestEnd, RequestProgress, StepEvent
from core.engine.kv_sizing import num_kv_blocks
from core.engine.wire import MAX_STEP_INTERVAL_S
from core.models.loader import load_hf_config, load_model
from core.outputs import EngineCoreOutputs, EngineCoreRequest
from core.request import Request, RequestStatus
from core.sched.scheduler import Scheduler
from core.worker.cpu_tuning import tune_cpu_allocator
from core.worker.model_runner import ModelRunner, ModelRunnerOutput

log = logging.getLogger("enginetui.core")


class EngineCore:
    """One `step()` = schedule -> execute -> update, plus the step event describing it."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config  # validated engine configuration
        torch.manual_seed(config.seed)
        if config.torch_device.type == "cpu":
            tune_cpu_allocator()
        hf_config, model_dir = load_hf_config(config)
        self.hf_config = hf_config  # the model's Hugging Face config
        self.model_dir = model_dir  # where weights / tokenizer live (None for name-only dummy models)
        model = load_model(config, hf_config, model_dir)
        dtype = next(model.parameters()).dtype
        self.max_model_len = config.max_model_len or hf_config.max_position_embeddings  # longest request
        if self.max_model_len > hf_config.max_position_embeddings:
            raise ValueError(
                f"max_model_len {self.max_model_len} exceeds the model's {hf_config.max_position_embeddings} positions"
            )
        self.num_blocks = num_kv_blocks(config, model, dtype)  # KV pool size
        self.scheduler = Scheduler(config, self.num_blocks, self.max_model_len)  # queues + KV manager
        self.runner = ModelRunner(model, self.num_blocks, config.block_size, config.max_num_seqs,
                                  self.max_model_len, dtype, config.torch_device, config.seed)  # model + cache
        self.step_count = 0  # steps taken
        self.paused = False  # set by the busy loop's control handling; reported in events
        self.step_interval_s = 0.0  # slow motion: the busy loop starts steps at most this often
        self.total_output_tokens = 0  # tokens generated since start
        self.total_preemptions = 0  # preemptions since start
        self.last_timings: dict[str, float] = {}  # ms per stage of the last step (profiling)
        self._last_event: StepEvent | None = None  # for snapshots
        log.info("EngineCore ready: %d KV blocks of %d tokens, max_model_len %d", self.num_blocks,
                 config.block_size, self.max_model_len)

    # ---- requests --------------------------------------------------------------------------

    def add_request(self, req: EngineCoreRequest) -> None:
        params = req.sampling_params
        max_tokens = params.max_tokens if params.max_tokens is not None else self.max_model_len - len(req.prompt_token_ids)
        request = Request(req.request_id, list(req.prompt_token_ids), params, req.eos_token_ids,
                          req.arrival_time, req.priority, max(max_tokens, 1))
        if req.request_id in self.scheduler.requests:
            request.max_tokens = max_tokens
            self.scheduler.reject(request, f"duplicate request id {req.request_id!r}")
            return
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids: list[str], detail: str = "aborted by the client") -> None:
        self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED, detail)

    def has_work(self) -> bool:
        """True while a step would compute something or deliver pending outputs."""
        return self.scheduler.has_unfinished_requests() or self.scheduler.has_pending_outputs()

    def reset_prefix_cache(self) -> bool:
        """Forget the prefix cache. False (nothing done) while requests hold blocks, as in vLLM."""
        return self.scheduler.reset_prefix_cache()

    def set_step_interval(self, seconds: float) -> None:
        """Slow motion: while there is work, the loop driving this core starts a step at most every
        `seconds` (0 = full speed); work arriving at an idle or paused engine starts at once.
        Inputs are still served while a step is held back."""
        if not 0.0 <= seconds <= MAX_STEP_INTERVAL_S:
            raise ValueError(f"step interval must be between 0 and {MAX_STEP_INTERVAL_S:g} s, got {seconds!r}")
        self.step_interval_s = float(seconds)

    # ---- the step --------------------------------------------------------------------------

    def step(self) -> tuple[EngineCoreOutputs, StepEvent | None]:
        t0 = time.perf_counter()
        sched_out = self.scheduler.schedule()
        t1 = time.perf_counter()
        try:
            result = self.runner.execute(sched_out)
        except Exception as exc:  # a failed forward fails the requests in it, not the engine
            log.exception("model step failed")
            result = ModelRunnerOutput(sampled={}, logprobs={}, forward_ms=0.0, sample_ms=0.0, prepare_ms=0.0)
            self.scheduler.fail_step(sched_out, f"model step failed: {type(exc).__name__}: {exc}")
        t2 = time.perf_counter()
        outputs = self.scheduler.update_from_output(sched_out, result.sampled, result.logprobs)
        t3 = time.perf_counter()
        self.step_count += 1
        self.total_output_tokens += len(result.sampled)
        if self.config.debug_invariants:
            self.scheduler.check_invariants()
        changes = self.scheduler.kv.pool.drain_step_changes()
        record = self.scheduler.drain_step_record()
        self.total_preemptions += len(record.preempted)
        event = None
        if self.config.enable_step_events:
            event = self._build_event(sched_out, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, changes, record)
        t4 = time.perf_counter()
        self.last_timings = {
            "schedule": (t1 - t0) * 1e3, "prepare": result.prepare_ms, "forward": result.forward_ms,
            "sample": result.sample_ms, "update": (t3 - t2) * 1e3, "event": (t4 - t3) * 1e3,
        }
        return EngineCoreOutputs(outputs=outputs, step=self.step_count, timestamp=time.time()), event

    # ---- events ----------------------------------------------------------------------------

    def _build_event(self, sched_out, sched_ms: float, exec_ms: float, update_ms: float, changes, record) -> StepEvent:
        """`changes`: blocks allocated and freed this step; `record`: the scheduler's StepRecord."""
        allocated, freed = changes
        preempted = [Preemption(p.req_id, p.lost_tokens, p.freed_blocks) for p in record.preempted]
        finished = [RequestEnd(e.req_id, e.reason, e.detail, e.num_output_tokens) for e in record.finished]
        rejected = [RequestEnd(e.req_id, e.reason, e.detail, e.num_output_tokens) for e in record.rejected]
        event = self._event(
            is_snapshot=False, sched_ms=sched_ms, exec_ms=exec_ms, update_ms=update_ms,
            scheduled=dict(sched_out.num_scheduled_tokens), num_prefill=sched_out.num_prefill_tokens,
            num_decode=sched_out.num_decode_tokens, allocated=allocated, freed=freed,
            preempted=preempted, finished=finished, rejected=rejected,
        )
        self._last_event = event
        return event

    def snapshot(self) -> StepEvent:
        """The full current state, as an event a late subscriber can draw from scratch."""
        last = self._last_event
        return self._event(
            is_snapshot=True, sched_ms=last.sched_ms if last else 0.0, exec_ms=last.exec_ms if last else 0.0,
            update_ms=last.update_ms if last else 0.0, scheduled=last.scheduled if last else {},
            num_prefill=last.num_prefill_tokens if last else 0, num_decode=last.num_decode_tokens if last else 0,
            allocated=[], freed=[], preempted=[], finished=[], rejected=[],
        )

    def _event(self, *, is_snapshot, sched_ms, exec_ms, update_ms, scheduled, num_prefill, num_decode,
               allocated, freed, preempted, finished, rejected) -> StepEvent:
        sched = self.scheduler
        kv = sched.kv
        pool = kv.pool
        # Only reachable blocks are scanned (never the whole pool): sharing and cached-free blocks
        # exist only with prefix caching; shared blocks sit in running block tables.
        shared, cached_free = [], []
        if kv.enable_prefix_caching:
            shared = sorted({b.block_id for r in sched.running for b in kv.req_to_blocks.get(r.request_id, ()) if b.ref_cnt > 1})
            cached_free = kv.cached_free_block_ids()
        return StepEvent(
            version=SCHEMA_VERSION, step=self.step_count, time=time.time(), is_snapshot=is_snapshot,
            paused=self.paused, sched_ms=sched_ms, exec_ms=exec_ms, update_ms=update_ms,
            token_budget=self.config.max_num_batched_tokens, max_num_seqs=self.config.max_num_seqs,
            num_scheduled_tokens=sum(scheduled.values()), num_prefill_tokens=num_prefill,
            num_decode_tokens=num_decode, scheduled=scheduled,
            running=[self._progress(r) for r in sched.running],
            waiting=[self._progress(r) for r in sched.waiting],
            num_blocks=kv.num_blocks, block_size=self.config.block_size, num_free_blocks=pool.num_free_blocks,
            num_cached_free_blocks=len(cached_free), shared_blocks=shared, cached_free_blocks=cached_free,
            blocks_allocated=allocated, blocks_freed=freed, preempted=preempted, finished=finished,
            rejected=rejected, prefix_cache_queries=kv.prefix_queries, prefix_cache_hits=kv.prefix_hits,
            num_dropped_events=0, total_output_tokens=self.total_output_tokens,
            total_preemptions=self.total_preemptions, step_interval_ms=self.step_interval_s * 1e3,
        )

    def _progress(self, r: Request) -> RequestProgress:
        return RequestProgress(
            req_id=r.request_id, status=r.status.value, num_prompt_tokens=r.num_prompt_tokens,
            num_computed_tokens=r.num_computed_tokens, num_tokens=r.num_tokens,
            num_output_tokens=r.num_output_tokens, max_tokens=r.max_tokens, num_cached_tokens=r.num_cached_tokens,
            num_preemptions=r.num_preemptions, priority=r.priority, arrival_time=r.arrival_time,
            block_ids=self.scheduler.kv.block_ids(r.request_id), first_scheduled_time=r.first_scheduled_time,
        )
