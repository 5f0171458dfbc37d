"""EngineCore: the scheduler, the model runner, one step, and the events that describe them.

EngineCore is driven by one busy loop (core/engine/busy_loop.py), in a child process or on a
thread of the caller. Every change of its state is reported: `step()` returns the step's
outputs and event; anything done between steps (requests added, aborted or rejected, pause,
pace, prefix-cache reset) marks the state changed, and `take_update()` returns the pending
outputs and one "update" event for all of it.
"""

import logging
import time

from enginetui.core.config import EngineConfig
from enginetui.core.engine.batch_queue import BatchQueue
from enginetui.core.engine.engine_info import EngineInfo
from enginetui.core.engine.event_builder import EngineTotals, StepSummary, StepTimes, StepWork, build_step_event
from enginetui.core.engine.events import RequestAdded, StepEvent, StepPhase
from enginetui.core.engine.kv_sizing import kv_bytes_per_token, size_kv_pool
from enginetui.core.models.generation_config import generation_defaults
from enginetui.core.models.loader import load_hf_config, load_model
from enginetui.core.outputs import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
from enginetui.core.request import Request, RequestStatus
from enginetui.core.sched.scheduler import Scheduler
from enginetui.core.sched.step_record import StepRecord
from enginetui.core.sched.step_shape import StepShape
from enginetui.core.worker.cpu_linear import prepare_cpu_model
from enginetui.core.worker.cuda_graphs import GraphSetup
from enginetui.core.worker.model_runner import ModelRunnerOutput, compute_threads
from enginetui.core.worker.runner_class import Runner, runner_class

log = logging.getLogger("enginetui.core")


class EngineCore:
    """One `step()` = schedule -> execute -> update, plus the event describing it.

    With asynchronous scheduling one `step()` plans step N+1 and hands it to the model thread, then
    waits for step N and applies its tokens while N+1 executes (core/engine/batch_queue.py)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config  # validated engine configuration
        hf_config, model_dir = load_hf_config(config)
        self.hf_config = hf_config  # the model's Hugging Face config
        self.model_dir = model_dir  # where weights / tokenizer live (None for name-only dummy models)
        model = load_model(config, hf_config, model_dir)
        prepare_cpu_model(model, config.torch_device)
        # compute threads before any step (the thread governor, if any, starts from all of them)
        self.cpu_threads = compute_threads(config.torch_device)
        dtype = next(model.parameters()).dtype
        self.max_model_len = config.max_model_len or hf_config.max_position_embeddings  # longest request
        if self.max_model_len > hf_config.max_position_embeddings:
            raise ValueError(
                f"max_model_len {self.max_model_len} exceeds the model's {hf_config.max_position_embeddings} positions"
            )
        pool = size_kv_pool(config, kv_bytes_per_token(model, dtype), self.max_model_len)
        self.num_blocks = pool.num_blocks  # KV pool size
        self.kv_pool_rule = pool.rule  # how that size was chosen, in words
        self.scheduler = Scheduler(config, self.num_blocks, self.max_model_len)  # queues + KV manager
        # The model runner (config.model_runner; the real one by default): model + cache.
        self.runner: Runner = runner_class(config.model_runner)(
            model,
            self.num_blocks,
            config.block_size,
            config.max_num_seqs,
            self.max_model_len,
            dtype,
            config.torch_device,
            config.seed,
        )
        setup_graphs = getattr(self.runner, "setup_cuda_graphs", None)  # runners of fixed tokens have none
        # Decode graphs captured now, after the KV cache exists (none on CPU: the reason is kept instead).
        self.cuda_graphs = (
            setup_graphs(config) if setup_graphs else GraphSetup([], off_reason="a runner without graphs")
        )
        self.step_count = 0  # busy-loop steps taken (one plan and / or one applied step each)
        # Asynchronous scheduling: plans in flight on the model thread (None: synchronous steps).
        self.batch_queue = BatchQueue(self.runner) if config.use_async_scheduling else None
        self.paused = False  # only single steps run while paused
        self.step_interval_s = 0.0  # slow motion: the busy loop starts steps at most this often
        self.total_output_tokens = 0  # tokens generated since start
        self.total_preemptions = 0  # preemptions since start
        self.last_timings: dict[str, float] = {}  # ms per stage of the last step (profiling)
        self.event_seq = 0  # seq of the latest published event
        self._latest_step = StepSummary(
            {}, 0, 0, [], StepTimes(), StepShape()
        )  # the latest step's plan and times (updates repeat them)
        self._added: list[RequestAdded] = []  # requests added since the latest event
        self._changed = False  # state changed outside a step since the latest event
        log.info(
            "EngineCore ready: %d KV blocks of %d tokens (%s), max_model_len %d",
            self.num_blocks,
            config.block_size,
            self.kv_pool_rule,
            self.max_model_len,
        )

    def describe(self, pid: int) -> EngineInfo:
        """What a client needs to know about this engine (`pid`: the process it runs in)."""
        generation = generation_defaults(self.model_dir, self.hf_config)
        model = self.runner.model
        dtype = next(model.parameters()).dtype
        return EngineInfo(
            model_name=self.config.model or "default",
            model_dir=str(self.model_dir) if self.model_dir is not None else None,
            architecture=type(model).__name__,
            num_parameters=sum(p.numel() for p in model.parameters()),
            kv_bytes_per_token=kv_bytes_per_token(model, dtype),
            vocab_size=self.hf_config.vocab_size,
            max_model_len=self.max_model_len,
            num_blocks=self.num_blocks,
            kv_pool_rule=self.kv_pool_rule,
            block_size=self.config.block_size,
            device=str(self.config.torch_device),
            dtype=str(dtype).removeprefix("torch."),
            eos_token_ids=generation.eos_token_ids,
            default_sampling=generation.sampling,
            pid=pid,
            cpu_threads=self.cpu_threads,
            cuda_graph_sizes=self.cuda_graphs.sizes,
            cuda_graph_capture_s=self.cuda_graphs.capture_s,
            cuda_graphs_off=self.cuda_graphs.off_reason,
        )

    # ---- changes between steps -------------------------------------------------------------

    def add_request(self, req: EngineCoreRequest) -> None:
        params = req.sampling_params
        max_tokens = (
            params.max_tokens if params.max_tokens is not None else self.max_model_len - len(req.prompt_token_ids)
        )
        request = Request(
            req.request_id,
            list(req.prompt_token_ids),
            params,
            req.eos_token_ids,
            req.arrival_time,
            req.priority,
            max(max_tokens, 1),
        )
        self._added.append(
            RequestAdded(
                req.request_id, request.prompt_token_ids, params, request.max_tokens, req.priority, req.arrival_time
            )
        )
        self._changed = True
        if req.request_id in self.scheduler.requests:
            self.scheduler.reject(request, f"duplicate request id {req.request_id!r}")
            return
        self.scheduler.add_request(request)

    def abort_requests(self, request_ids: list[str], detail: str = "aborted by the client") -> None:
        if self.scheduler.finish_requests(request_ids, RequestStatus.FINISHED_ABORTED, detail):
            self._changed = True

    def report_error(self, request_id: str, detail: str) -> None:
        """A request that could not even be added (e.g. it did not decode) ends with this error."""
        self.scheduler.report_error(request_id, detail)
        self._changed = True

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._changed = True

    def set_step_interval(self, seconds: float) -> None:
        """Slow motion: while there is work, the loop driving this core starts a step at most every
        `seconds` (0 = full speed); work arriving at an idle or paused engine starts at once.
        Inputs are still served while a step is held back. (Validated by core.engine.control.)"""
        self.step_interval_s = seconds
        self._changed = True

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix; False (nothing done) while requests hold blocks."""
        done = self.scheduler.reset_prefix_cache()
        self._changed = True
        return done

    def has_work(self) -> bool:
        """True while a step would compute something (or apply a step still in flight)."""
        if self.batch_queue is not None:
            return self.scheduler.has_requests() or len(self.batch_queue) > 0
        return self.scheduler.has_unfinished_requests()

    def close(self) -> None:
        """End the model thread (asynchronous scheduling) once its step in flight is done."""
        if self.batch_queue is not None:
            self.batch_queue.close()

    def take_update(self) -> tuple[list[EngineCoreOutput], StepEvent | None]:
        """Outputs produced between steps (aborts, rejections, errors) and, if the state changed
        since the latest event, an "update" event describing the change."""
        outputs = self.scheduler.take_pending_outputs()
        event = None
        if self._changed:
            self._changed = False
            event = self._build_event("update")
        return outputs, event

    # ---- the step --------------------------------------------------------------------------

    def step(self) -> tuple[EngineCoreOutputs, StepEvent | None]:
        if self.batch_queue is not None:
            return self._step_async()
        return self._step_sync()

    def _step_sync(self) -> tuple[EngineCoreOutputs, StepEvent | None]:
        """Schedule, execute, update, in turn."""
        t0, w0 = time.perf_counter(), time.time()
        plan = self.scheduler.schedule()
        t1, w1 = time.perf_counter(), time.time()
        try:
            result, error = self.runner.execute(plan), ""
        except Exception as exc:  # a failed forward fails the requests in it, not the engine
            log.exception("model step failed")
            result, error = None, f"{type(exc).__name__}: {exc}"
        t2, w2 = time.perf_counter(), time.time()
        outputs, result = self._apply(plan, result, error)
        t3, w3 = time.perf_counter(), time.time()
        n = plan.shape.step  # the scheduler numbers its plans
        work = StepWork(
            n, n, [StepPhase(n, "schedule", w0, w1), StepPhase(n, "execute", w1, w2), StepPhase(n, "update", w2, w3)]
        )
        times = StepTimes(
            sched_ms=(t1 - t0) * 1e3,
            exec_ms=(t2 - t1) * 1e3,
            update_ms=(t3 - t2) * 1e3,
            forward_ms=result.forward_ms,
            sample_ms=result.sample_ms,
            compute_threads=result.compute_threads,
            cuda_graph_size=result.cuda_graph_size,
        )
        return self._finish_step(outputs, times, work, result.prepare_ms, t3, plan.total_num_scheduled_tokens)

    def _step_async(self) -> tuple[EngineCoreOutputs, StepEvent | None]:
        """Plan step N+1 and hand it to the model thread; then wait for step N and apply its tokens
        while N+1 executes. The first plan (an empty queue) returns at once, as vLLM's
        step_with_batch_queue does: the queue is filled before outputs are waited for."""
        queue = self.batch_queue
        if queue is None:
            raise RuntimeError("the async step needs the batch queue (use_async_scheduling)")
        phases = []
        planned = 0
        sched_ms = 0.0
        if self.scheduler.has_requests():
            t0, w0 = time.perf_counter(), time.time()
            plan = self.scheduler.schedule()
            sched_ms, w1 = (time.perf_counter() - t0) * 1e3, time.time()
            planned = plan.shape.step
            queue.submit(planned, plan)
            phases.append(StepPhase(planned, "schedule", w0, w1))
            if not queue.is_full() and (plan.total_num_scheduled_tokens > 0 or self.scheduler.has_requests()):
                times = StepTimes(sched_ms=sched_ms)
                return self._finish_step([], times, StepWork(planned, 0, phases), 0.0, time.perf_counter())
        elif not len(queue):
            return self._finish_step([], StepTimes(), StepWork(0, 0, []), 0.0, time.perf_counter())
        oldest, executed = queue.pop_oldest()
        t2, w2 = time.perf_counter(), time.time()
        if executed.error:
            log.error("model step %d failed: %s", oldest.step, executed.error)
        outputs, result = self._apply(oldest.plan, executed.output, executed.error)
        t3, w3 = time.perf_counter(), time.time()
        phases += [
            StepPhase(oldest.step, "execute", executed.start, executed.end),
            StepPhase(oldest.step, "update", w2, w3),
        ]
        times = StepTimes(
            sched_ms=sched_ms,
            exec_ms=(executed.end - executed.start) * 1e3,
            update_ms=(t3 - t2) * 1e3,
            forward_ms=result.forward_ms,
            sample_ms=result.sample_ms,
            compute_threads=result.compute_threads,
            cuda_graph_size=result.cuda_graph_size,
        )
        return self._finish_step(
            outputs,
            times,
            StepWork(planned, oldest.step, phases),
            result.prepare_ms,
            t3,
            oldest.plan.total_num_scheduled_tokens,
        )

    def _apply(
        self, plan, result: ModelRunnerOutput | None, error: str
    ) -> tuple[list[EngineCoreOutput], ModelRunnerOutput]:
        """Apply one executed plan's tokens to the scheduler (a failed execution fails its requests)."""
        if result is None:
            result = ModelRunnerOutput(sampled={}, logprobs={}, forward_ms=0.0, sample_ms=0.0, prepare_ms=0.0)
            self.scheduler.fail_step(plan, f"model step failed: {error}")
        outputs = self.scheduler.update_from_output(plan, result.sampled, result.logprobs)
        self.total_output_tokens += sum(len(o.new_token_ids) for o in outputs)  # discarded tokens never count
        return outputs, result

    def _finish_step(
        self,
        outputs: list[EngineCoreOutput],
        times: StepTimes,
        work: StepWork,
        prepare_ms: float,
        t_applied: float,
        num_scheduled_tokens: int = 0,
    ) -> tuple[EngineCoreOutputs, StepEvent | None]:
        """Count the busy-loop step, check invariants if asked, build its event. `num_scheduled_tokens`:
        the tokens of the plan whose outputs these are (0 where this busy-loop step applied none)."""
        self.step_count += 1
        if self.config.debug_invariants:
            self.scheduler.check_invariants()
        new_tokens = {o.request_id: o.new_token_ids for o in outputs if o.new_token_ids}
        self._changed = False
        event = self._build_event("step", times, new_tokens, work)
        t4 = time.perf_counter()
        self.last_timings = {
            "schedule": times.sched_ms,
            "prepare": prepare_ms,
            "forward": times.forward_ms,
            "sample": times.sample_ms,
            "update": times.update_ms,
            "event": (t4 - t_applied) * 1e3,
        }
        return EngineCoreOutputs(
            outputs=outputs, step=self.step_count, timestamp=time.time(), num_scheduled_tokens=num_scheduled_tokens
        ), event

    # ---- events ----------------------------------------------------------------------------

    def snapshot(self) -> StepEvent:
        """The full current state as a "snapshot" event (what a late subscriber draws from)."""
        return self._event("snapshot", StepRecord(), [], {}, StepWork(0, 0, []))

    def publishable_snapshot(self) -> StepEvent:
        """A snapshot to publish (it takes the next seq)."""
        self.event_seq += 1
        return self.snapshot()

    def _build_event(
        self,
        kind: str,
        times: StepTimes | None = None,
        new_tokens: dict[str, list[int]] | None = None,
        work: StepWork | None = None,
    ) -> StepEvent | None:
        """Drain what happened since the latest event into a new event (None with events off).

        A step event (`times` given) describes the step just taken; updates and snapshots repeat the
        latest step's plan and times.
        """
        record = self.scheduler.drain_step_record()
        self.total_preemptions += len(record.preempted)
        added, self._added = self._added, []
        if times is not None:
            self._latest_step = StepSummary.of(record, times)
        if not self.config.enable_step_events:
            return None
        self.event_seq += 1
        return self._event(kind, record, added, new_tokens or {}, work or StepWork(0, 0, []))

    def _event(
        self, kind: str, record: StepRecord, added: list[RequestAdded], new_tokens: dict[str, list[int]], work: StepWork
    ) -> StepEvent:
        """`record`: what happened since the latest event; the plan and times are the latest step's."""
        totals = EngineTotals(
            self.event_seq,
            self.step_count,
            time.time(),
            self.paused,
            self.total_output_tokens,
            self.total_preemptions,
            self.step_interval_s * 1e3,
            self.batch_queue is not None,
        )
        return build_step_event(
            kind, totals, self.config, self.scheduler, record, self._latest_step, added, new_tokens, work
        )
