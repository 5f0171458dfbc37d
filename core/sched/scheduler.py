"""The V1 scheduler: one token budget per step, running requests first, then waiting ones.

There are no prefill or decode phases. Each request's `num_computed_tokens` catches up with its
`num_tokens`; every step the scheduler decides how far each request advances. Long prompts are
split by the budget clamp (chunked prefill); when the KV pool runs dry a running request is
preempted by recompute (its blocks freed, its progress reset, put back at the head of waiting).

With asynchronous scheduling (vLLM's AsyncScheduler) step N+1 is planned before step N's sampled
tokens are applied: a request whose step will sample counts one output placeholder per step in
flight, and is planned on as if the token were there (the model runner feeds it the token it
sampled itself). A request that reaches max_tokens with a step in flight is not planned again; one
that stops on a token found one step late has its extra step's token discarded; a request preempted
while its step is in flight still receives that step's token (stale: it moves no counter of the
reset request). A step that fails is seen after the next plan was made: `fail_step` forgets what
it was to write, not what the next plan writes.
"""

import time

from enginetui.core.ceil_div import cdiv
from enginetui.core.config import EngineConfig
from enginetui.core.kv.kv_cache_manager import KVCacheManager
from enginetui.core.outputs import EngineCoreOutput, Logprob
from enginetui.core.request import Request, RequestStatus
from enginetui.core.sched.output import SchedulerOutput, cached_request_data, new_request_data
from enginetui.core.sched.request_queue import make_queue
from enginetui.core.sched.step_record import Admitted, Chunk, Ended, KVState, Preempted, StepRecord
from enginetui.core.sched.step_shape import StepShape
from enginetui.core.sched.stop import check_stop


class Scheduler:
    """Owns the waiting and running queues and the KV cache manager."""

    def __init__(self, config: EngineConfig, num_blocks: int, max_model_len: int) -> None:
        if config.long_prefill_token_threshold > max_model_len:
            raise ValueError(
                f"long_prefill_token_threshold ({config.long_prefill_token_threshold}) cannot be "
                f"greater than max_model_len ({max_model_len})"
            )
        self.config = config  # budgets and policies
        self.async_scheduling = (
            config.use_async_scheduling
        )  # steps are planned before the previous one's tokens are applied
        self.max_model_len = max_model_len  # longest prompt + output
        self.kv = KVCacheManager(num_blocks, config.block_size, config.enable_prefix_caching)  # block tables
        self.waiting = make_queue(config.scheduling_policy)  # admission queue
        self.running: list[Request] = []  # requests holding KV, in admission order
        self.requests: dict[str, Request] = {}  # every live request by id
        self.finished_req_ids: set[str] = set()  # ended since the last schedule(); told to the runner
        self._pending_outputs: list[EngineCoreOutput] = []  # outputs of aborts / rejections / errors not yet sent
        self.first_scheduled: dict[str, float] = {}  # request id -> first schedule time, until reported
        self._record = StepRecord()  # what happened since the last drain_step_record()
        self.num_plans = 0  # schedule() calls so far: the latest plan's step number

    # ---- admission -------------------------------------------------------------------------

    def add_request(self, request: Request) -> None:
        """Queue a request, or reject it now if it could never run to completion."""
        reason = self._never_fits(request)
        if reason:
            self.reject(request, reason)
            return
        self.requests[request.request_id] = request
        self.waiting.add(request)

    def reject(self, request: Request, reason: str) -> None:
        """Refuse a request at admission; its only output says why."""
        request.status = RequestStatus.REJECTED
        request.finish_detail = reason
        self._record.rejected.append(Ended(request.request_id, "rejected", reason, 0))
        self._pending_outputs.append(
            EngineCoreOutput(
                request_id=request.request_id, new_token_ids=[], finish_reason="rejected", finish_detail=reason
            )
        )

    def report_error(self, request_id: str, detail: str) -> None:
        """A request that failed before it became a scheduler request (undecodable, bad input): its only output."""
        self._record.finished.append(Ended(request_id, RequestStatus.FINISHED_ERROR.value, detail, 0))
        self._pending_outputs.append(
            EngineCoreOutput(request_id=request_id, new_token_ids=[], finish_reason="error", finish_detail=detail)
        )

    def _never_fits(self, request: Request) -> str:
        total = request.num_prompt_tokens + request.max_tokens
        if total > self.max_model_len:
            return f"prompt ({request.num_prompt_tokens}) + max_tokens ({request.max_tokens}) exceeds max_model_len ({self.max_model_len})"
        kv_tokens = total - 1  # the last sampled token is never computed
        if not self.kv.can_ever_fit(kv_tokens):
            need = cdiv(kv_tokens, self.config.block_size)
            return (
                f"needs {need} KV blocks for {kv_tokens} tokens (prompt + max_tokens - 1) "
                f"but the whole pool has {self.kv.num_blocks}"
            )
        if not self.config.enable_chunked_prefill and kv_tokens > self.config.max_num_batched_tokens:
            return (
                f"without chunked prefill, {kv_tokens} tokens may need computing in one step "
                f"but max_num_batched_tokens is {self.config.max_num_batched_tokens}"
            )
        return ""

    # ---- schedule --------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        """Spend this step's token budget: running requests first, then admit waiting ones.

        Follows vLLM's Scheduler.schedule() rule for rule (see docs/architecture.md "Scheduling rules").
        """
        step = _StepPlan(self.config.max_num_batched_tokens)
        threshold = self._long_prefill_threshold()
        self._schedule_running(step, threshold)
        if not step.preempted:  # a step that had to preempt admits nobody
            self._admit_waiting(step, threshold)
        output = SchedulerOutput(
            scheduled_new_reqs=[new_request_data(r, self.kv.block_ids(r.request_id)) for r in step.new],
            scheduled_cached_reqs=cached_request_data(step.running, step.new_blocks),
            num_scheduled_tokens=step.num_scheduled,
            total_num_scheduled_tokens=sum(step.num_scheduled.values()),
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids={r.request_id for r in step.preempted},
        )
        self.finished_req_ids = set()
        self._advance_progress(output, step.running + step.new)
        return output

    def _long_prefill_threshold(self) -> int:
        """The per-request cap on tokens this step (0: none). Not applied to a lone request: there is
        nobody for it to starve."""
        if len(self.running) + len(self.waiting) > 1:
            return self.config.long_prefill_token_threshold
        return 0

    def _schedule_running(self, step: "_StepPlan", threshold: int) -> None:
        """Advance running requests in order; preempt from the back (or the lowest priority) when the
        pool cannot serve one, and stop at the first that cannot be served even then."""
        i = 0
        while i < len(self.running) and step.budget > 0:
            request = self.running[i]
            if (
                request.num_output_placeholders > 0
                and request.num_computed_tokens + 2 - request.num_output_placeholders
                >= request.num_prompt_tokens + request.max_tokens
            ):
                i += 1  # the step in flight reaches max_tokens: no further step is needed
                continue
            num_new = request.num_tokens + request.num_output_placeholders - request.num_computed_tokens
            if 0 < threshold < num_new:
                num_new = threshold
            num_new = min(num_new, step.budget, self.max_model_len - request.num_computed_tokens - 1)
            if num_new <= 0:
                i += 1
                continue
            while True:
                blocks = self.kv.allocate_slots(request, num_new)
                if blocks is not None:
                    break
                victim = self._pick_victim()
                victim_index = self.running.index(victim)
                del self.running[victim_index]
                if victim_index < i:
                    i -= 1
                if victim.request_id in step.num_scheduled:  # scheduled earlier this step: give its tokens back
                    step.running.remove(victim)
                    step.budget += step.num_scheduled.pop(victim.request_id)
                    del step.new_blocks[victim.request_id]
                self._preempt(victim)
                step.preempted.append(victim)
                if victim is request:
                    break
            if blocks is None:
                break
            step.running.append(request)
            step.num_scheduled[request.request_id] = num_new
            step.new_blocks[request.request_id] = [b.block_id for b in blocks]
            step.budget -= num_new
            i += 1

    def _admit_waiting(self, step: "_StepPlan", threshold: int) -> None:
        """Admit from the head of waiting while budget, max_num_seqs and the pool allow; stop at the
        first request that does not fit (no skipping ahead)."""
        config = self.config
        while step.budget > 0 and len(self.waiting) and len(self.running) < config.max_num_seqs:
            request = self.waiting.peek()
            hit_blocks, num_hit_tokens = self.kv.get_computed_blocks(request)
            # KV a connector brings (first admission only, as vLLM's; the last prompt token is computed here)
            num_external = 0 if request.num_preemptions else max(request.num_external_tokens - num_hit_tokens, 0)
            num_new = request.num_tokens - num_hit_tokens - num_external
            if 0 < threshold < num_new:
                num_new = threshold
            if not config.enable_chunked_prefill and num_new > step.budget:
                break
            num_new = min(num_new, step.budget)
            blocks = self.kv.allocate_slots(
                request, num_new + num_external, hit_blocks, config.scheduler_reserve_full_isl
            )
            if blocks is None:
                break
            self.kv.record_lookup(request, num_hit_tokens)
            self.waiting.pop()
            resumed = request.status is RequestStatus.PREEMPTED
            if not request.num_preemptions:
                request.num_cached_tokens = num_hit_tokens  # vLLM reports the first admission's hits
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_hit_tokens + num_external
            self.running.append(request)
            if request.first_scheduled_time is None:
                request.first_scheduled_time = time.time()
                self.first_scheduled[request.request_id] = request.first_scheduled_time
            step.new.append(request)
            self._record.admitted.append(Admitted(request.request_id, num_new, num_hit_tokens, resumed))
            step.num_scheduled[request.request_id] = num_new
            step.new_blocks[request.request_id] = [b.block_id for b in blocks]
            step.budget -= num_new

    def _pick_victim(self) -> Request:
        """FCFS: the most recently admitted running request. Priority: the lowest-priority one (the
        latest arrival among equals; the first in running order among full ties)."""
        if self.config.scheduling_policy == "priority":
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    def _preempt(self, request: Request) -> None:
        """Preempt by recompute: free its blocks, reset its progress, put it back at the head of waiting."""
        lost = request.num_computed_tokens
        freed = self.kv.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_stale_output_tokens = request.num_in_flight_tokens  # its steps in flight still deliver
        request.num_output_placeholders = 0
        request.num_preemptions += 1
        request.num_tokens_sent_to_runner = 0
        self.waiting.prepend(request)
        self._record.preempted.append(Preempted(request.request_id, lost, freed))

    def _advance_progress(self, output: SchedulerOutput, requests: list[Request]) -> None:
        """Count the plan's tokens as computed, split them into prefill and decode work, and record
        the plan: what each request was scheduled for, which prefills are split, which requests decode,
        and the step's shape."""
        record = self._record
        record.scheduled = dict(output.num_scheduled_tokens)
        record.chunks, record.decodes = [], []
        num_sampled = decode_context = prefill_kv = pairs = 0
        for request in requests:
            n = output.num_scheduled_tokens[request.request_id]
            before = request.num_computed_tokens
            after = before + n
            placeholders = request.num_output_placeholders
            num_tokens = request.num_tokens + placeholders  # known tokens and tokens being sampled
            is_decode = n == 1 and request.num_output_tokens + placeholders > 0 and before == num_tokens - 1
            if is_decode:
                output.num_decode_tokens += 1
                record.decodes.append(request.request_id)
                decode_context += after
            else:
                output.num_prefill_tokens += n
                prefill_kv += after
                pairs += n * before + n * (n + 1) // 2
            request.num_computed_tokens = after
            request.num_in_flight_tokens += n
            remaining = num_tokens - after
            if remaining > 0 or (before > request.num_cached_tokens and not is_decode):
                record.chunks.append(Chunk(request.request_id, n, remaining))
            request.is_prefill_chunk = remaining > 0
            if remaining == 0:  # this step samples
                num_sampled += 1
                if self.async_scheduling:  # its token is a placeholder until applied
                    request.num_output_placeholders += 1
        self.num_plans += 1
        output.shape = record.shape = StepShape(
            self.num_plans,
            len(requests),
            output.num_prefill_tokens,
            output.num_decode_tokens,
            num_sampled,
            decode_context,
            prefill_kv,
            pairs,
        )
        record.num_prefill_tokens = output.num_prefill_tokens
        record.num_decode_tokens = output.num_decode_tokens

    # ---- update ----------------------------------------------------------------------------

    def update_from_output(
        self,
        output: SchedulerOutput,
        sampled: dict[str, int],
        logprobs: dict[str, list[Logprob]] | None = None,
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, apply stop conditions, free finished requests' blocks (in the
        order they were scheduled, as vLLM does).

        With asynchronous scheduling `output` may be older than the latest plan: its tokens replace
        placeholders; a request that ended meanwhile gets nothing (its extra token is discarded); a
        request preempted meanwhile still gets its token (stale: no placeholder to replace).
        """
        outputs = self.take_pending_outputs()
        stopped: set[str] = set()
        stopped_waiting: list[Request] = []
        for req_id, num_scheduled in output.num_scheduled_tokens.items():
            request = self.requests.get(req_id)
            if request is None or request.status.finished:
                continue  # ended while its step ran (a failed step, an abort, a stop found one step late)
            request.num_in_flight_tokens -= num_scheduled
            if request.num_void_tokens:  # planned on KV a failed step never wrote: its token is dropped
                request.num_void_tokens -= num_scheduled
                continue
            is_stale = request.num_stale_output_tokens > 0
            if is_stale:
                request.num_stale_output_tokens -= num_scheduled
            was_running = request.status is RequestStatus.RUNNING
            token = sampled.get(req_id)
            new_tokens = []
            if token is not None:
                request.output_token_ids.append(token)
                new_tokens.append(token)
                if was_running:
                    request.num_tokens_sent_to_runner += 1  # the runner appended the token it sampled itself
                if not is_stale and request.num_output_placeholders:
                    request.num_output_placeholders -= 1
                check_stop(request, token, self.max_model_len)
                if was_running and self.async_scheduling:
                    self.kv.publish_computed(request, request.num_computed_tokens - request.num_output_placeholders)
            out = EngineCoreOutput(
                request_id=req_id, new_token_ids=new_tokens, num_cached_tokens=request.num_cached_tokens
            )
            if logprobs and req_id in logprobs:
                out.new_logprobs = [logprobs[req_id]]
            first = self.first_scheduled.pop(req_id, None)
            if first is not None:
                out.first_scheduled_time = first
            if request.status.finished:
                out.finish_reason = request.status.value
                out.finish_detail = request.finish_detail
                out.num_preemptions = request.num_preemptions
                if request.status is RequestStatus.FINISHED_STOPPED:
                    out.stop_token_id = token
                self._free_finished(request)
                if was_running:
                    stopped.add(req_id)
                else:
                    stopped_waiting.append(request)
            if new_tokens or out.finish_reason or out.first_scheduled_time is not None:
                outputs.append(out)
        if stopped:
            self.running = [r for r in self.running if r.request_id not in stopped]
        for request in stopped_waiting:  # preempted, then stopped by its stale token
            self.waiting.remove(request)
        return outputs

    def _free_finished(self, request: Request) -> None:
        self.kv.free(request)
        self.requests.pop(request.request_id, None)
        self.finished_req_ids.add(request.request_id)
        self._record.finished.append(
            Ended(request.request_id, request.status.value, request.finish_detail, request.num_output_tokens)
        )

    # ---- aborts and queries ----------------------------------------------------------------

    def finish_requests(self, request_ids, status: RequestStatus, detail: str) -> list[str]:
        """End live requests from outside a step (abort, stop string, error). Returns the ids it ended."""
        ended = []
        for req_id in request_ids:
            request = self.requests.get(req_id)
            if request is None:
                continue
            if request.status is RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove(request)
            request.status = status
            request.finish_detail = detail
            self.first_scheduled.pop(req_id, None)
            self._free_finished(request)
            self._pending_outputs.append(
                EngineCoreOutput(
                    request_id=req_id,
                    new_token_ids=[],
                    finish_reason=status.value,
                    finish_detail=detail,
                    num_preemptions=request.num_preemptions,
                )
            )
            ended.append(req_id)
        return ended

    def fail_step(self, output: SchedulerOutput, detail: str) -> list[str]:
        """The model step that was to compute `output` failed: its requests end with "error", and
        none of their blocks past the KV that earlier, applied steps wrote stays findable by hash
        (with asynchronous scheduling that includes blocks published by the plan made after it).
        A request of that later plan which found such a block by prefix was planned on KV never
        written: it starts over (preempted; its step in flight delivers nothing). Returns the ids ended."""
        failed = [self.requests[r] for r in output.num_scheduled_tokens if r in self.requests]
        forgotten: set[int] = set()
        for request in failed:
            if request.status is RequestStatus.RUNNING:  # a preempted one's blocks are already free
                written = request.num_computed_tokens - request.num_in_flight_tokens  # by steps already applied
                forgotten.update(b.block_id for b in self.kv.forget_unwritten_blocks(request, written))
        ended = self.finish_requests([r.request_id for r in failed], RequestStatus.FINISHED_ERROR, detail)
        for request in [r for r in self.running if set(self.kv.block_ids(r.request_id)) & forgotten]:
            self.running.remove(request)
            self._preempt(request)
            request.num_void_tokens, request.num_stale_output_tokens = request.num_stale_output_tokens, 0
        return ended

    def reset_prefix_cache(self) -> bool:
        """Forget the prefix cache; refused (False) while any request holds blocks, as in vLLM."""
        return self.kv.reset_prefix_cache()

    def has_unfinished_requests(self) -> bool:
        return bool(self.running) or bool(len(self.waiting))

    def has_requests(self) -> bool:
        """Unfinished requests, or ended ones the model runner has not yet been told of (vLLM's has_requests)."""
        return self.has_unfinished_requests() or bool(self.finished_req_ids)

    def has_pending_outputs(self) -> bool:
        return bool(self._pending_outputs)

    def take_pending_outputs(self) -> list[EngineCoreOutput]:
        """Outputs produced outside a step (aborts, rejections, errors) since the last take."""
        outputs, self._pending_outputs = self._pending_outputs, []
        return outputs

    def drain_step_record(self) -> StepRecord:
        """Everything recorded since the last drain: the latest plan, the admissions, preemptions and
        endings since the last drain (between-step aborts, rejections and errors included), and the
        blocks that changed hands."""
        record, self._record = self._record, StepRecord()
        record.blocks_allocated, record.blocks_freed = self.kv.pool.drain_step_changes()
        return record

    def kv_state(self) -> KVState:
        """The pool now. Only reachable blocks are scanned (never the whole pool): sharing and
        cached-free blocks exist only with prefix caching; shared blocks sit in running block tables."""
        kv = self.kv
        shared, cached_free = [], []
        if kv.enable_prefix_caching:
            shared = sorted(
                {b.block_id for r in self.running for b in kv.req_to_blocks.get(r.request_id, ()) if b.ref_cnt > 1}
            )
            cached_free = kv.cached_free_block_ids()
        return KVState(
            num_blocks=kv.num_blocks,
            num_free_blocks=kv.pool.num_free_blocks,
            shared_blocks=shared,
            cached_free_blocks=cached_free,
            prefix_cache_queries=kv.prefix_queries,
            prefix_cache_hits=kv.prefix_hits,
        )

    def block_ids(self, request_id: str) -> list[int]:
        """A request's block table (empty while it holds none)."""
        return self.kv.block_ids(request_id)

    def check_invariants(self) -> None:
        """Pool accounting, queue membership and progress bounds (debug mode, tests)."""
        self.kv.check_invariants()
        waiting_ids = {r.request_id for r in self.waiting}
        running_ids = {r.request_id for r in self.running}
        if waiting_ids & running_ids:
            raise AssertionError(f"requests both waiting and running: {waiting_ids & running_ids}")
        if waiting_ids | running_ids != set(self.requests):
            raise AssertionError("live requests and queues disagree")
        if len(self.running) > self.config.max_num_seqs:
            raise AssertionError(f"{len(self.running)} running > max_num_seqs {self.config.max_num_seqs}")
        for request in self.running:
            held = len(self.kv.req_to_blocks.get(request.request_id, ()))
            if cdiv(request.num_computed_tokens, self.config.block_size) > held:
                raise AssertionError(
                    f"{request.request_id} computed {request.num_computed_tokens} tokens with {held} blocks"
                )
        for request in self.waiting:
            if request.num_computed_tokens or request.request_id in self.kv.req_to_blocks:
                raise AssertionError(f"waiting request {request.request_id} holds KV state")


class _StepPlan:
    """What one schedule() call has decided so far."""

    __slots__ = ("budget", "num_scheduled", "new_blocks", "running", "new", "preempted")

    def __init__(self, budget: int) -> None:
        self.budget = budget  # tokens left to schedule this step
        self.num_scheduled: dict[str, int] = {}  # request id -> tokens this step, in scheduling order
        self.new_blocks: dict[str, list[int]] = {}  # request id -> block ids appended to its table this step
        self.running: list[Request] = []  # scheduled requests that were already running
        self.new: list[Request] = []  # requests admitted this step (new or resumed)
        self.preempted: list[Request] = []  # requests preempted this step, in order
