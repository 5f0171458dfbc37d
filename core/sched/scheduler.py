"""The V1 scheduler: one token budget per step, running requests first, then waiting ones.

There are no prefill or decode phases. Each request's `num_computed_tokens` catches up with its
`num_tokens`; every step the scheduler decides how far each request advances. Long prompts are
split by the budget clamp (chunked prefill); when the KV pool runs dry a running request is
preempted by recompute (its blocks freed, its progress reset, put back at the head of waiting).
"""

import time

from core.config import EngineConfig
from core.kv.kv_cache_manager import KVCacheManager, cdiv
from core.outputs import EngineCoreOutput, Logprob
from core.request import Request, RequestStatus
from core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from core.sched.request_queue import make_queue
from core.sched.step_record import Admitted, Ended, Preempted, StepRecord


class Scheduler:
    """Owns the waiting and running queues and the KV cache manager."""

    def __init__(self, config: EngineConfig, num_blocks: int, max_model_len: int) -> None:
        self.config = config  # budgets and policies
        self.max_model_len = max_model_len  # longest prompt + output
        self.kv = KVCacheManager(num_blocks, config.block_size, config.enable_prefix_caching)  # block tables
        self.waiting = make_queue(config.scheduling_policy)  # admission queue
        self.running: list[Request] = []  # requests holding KV, in admission order
        self.requests: dict[str, Request] = {}  # every live request by id
        self.finished_req_ids: set[str] = set()  # ended since the last schedule(); told to the runner
        self._pending_outputs: list[EngineCoreOutput] = []  # outputs of aborts / rejections / errors not yet sent
        self.first_scheduled: dict[str, float] = {}  # request id -> first schedule time, until reported
        self._record = StepRecord()  # what happened since the last drain_step_record()

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
            EngineCoreOutput(request_id=request.request_id, new_token_ids=[], finish_reason="rejected", finish_detail=reason)
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
        if not self.kv.can_ever_fit(total):
            need = cdiv(total, self.config.block_size)
            return f"needs {need} KV blocks for {total} tokens but the whole pool has {self.kv.num_blocks}"
        if not self.config.enable_chunked_prefill and total - 1 > self.config.max_num_batched_tokens:
            return (
                f"without chunked prefill, {total - 1} tokens may need computing in one step "
                f"but max_num_batched_tokens is {self.config.max_num_batched_tokens}"
            )
        return ""

    # ---- schedule --------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        """Spend this step's token budget: running requests first, then admit waiting ones."""
        self.kv.new_step()
        budget = self.config.max_num_batched_tokens
        num_scheduled: dict[str, int] = {}
        new_blocks: dict[str, list[int]] = {}
        scheduled_running: list[Request] = []
        scheduled_new: list[Request] = []
        preempted_ids: set[str] = set()

        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            while True:
                blocks = self.kv.allocate_slots(request, num_new)
                if blocks is not None:
                    break
                victim = self._pick_victim()
                if victim in scheduled_running:
                    scheduled_running.remove(victim)
                    budget += num_scheduled.pop(victim.request_id)
                    new_blocks.pop(victim.request_id, None)
                    i -= 1
                self._preempt(victim)
                preempted_ids.add(victim.request_id)
                if victim is request:
                    break
            if blocks is None:
                break
            scheduled_running.append(request)
            num_scheduled[request.request_id] = num_new
            new_blocks[request.request_id] = [b.block_id for b in blocks]
            budget -= num_new
            i += 1

        if not preempted_ids:
            budget = self._admit_waiting(budget, num_scheduled, new_blocks, scheduled_new)

        output = SchedulerOutput(
            scheduled_new_reqs=[self._new_request_data(r, num_scheduled) for r in scheduled_new],
            scheduled_cached_reqs=self._cached_request_data(scheduled_running, new_blocks),
            num_scheduled_tokens=num_scheduled,
            total_num_scheduled_tokens=sum(num_scheduled.values()),
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids=preempted_ids,
        )
        self.finished_req_ids = set()
        self._advance_progress(output, scheduled_running + scheduled_new)
        return output

    def _admit_waiting(self, budget, num_scheduled, new_blocks, scheduled_new) -> int:
        while len(self.waiting) and budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting.peek()
            hit_blocks, num_hit_tokens = self.kv.get_computed_blocks(request)
            num_new = request.num_tokens - num_hit_tokens
            if not self.config.enable_chunked_prefill and num_new > budget:
                break
            num_new = min(num_new, budget)
            blocks = self.kv.allocate_slots(request, num_new, hit_blocks)
            if blocks is None:
                break
            self.waiting.pop()
            self.kv.record_lookup(request.num_tokens, num_hit_tokens)
            resumed = request.status is RequestStatus.PREEMPTED
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_hit_tokens
            request.num_cached_tokens = num_hit_tokens
            self.running.append(request)
            if request.first_scheduled_time is None:
                request.first_scheduled_time = time.time()
                self.first_scheduled[request.request_id] = request.first_scheduled_time
            scheduled_new.append(request)
            self._record.admitted.append(Admitted(request.request_id, num_new, num_hit_tokens, resumed))
            num_scheduled[request.request_id] = num_new
            new_blocks[request.request_id] = [b.block_id for b in blocks]
            budget -= num_new
        return budget

    def _pick_victim(self) -> Request:
        """FCFS: the most recently admitted running request. Priority: the lowest-priority one."""
        if self.config.scheduling_policy == "priority":
            victim = max(self.running, key=lambda r: (r.priority, r.arrival_time))
            self.running.remove(victim)
            return victim
        return self.running.pop()

    def _preempt(self, request: Request) -> None:
        """Preempt by recompute: free its blocks, reset its progress, put it back at the head of waiting."""
        lost = request.num_computed_tokens
        freed = self.kv.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        request.num_tokens_sent_to_runner = 0
        self.waiting.prepend(request)
        self._record.preempted.append(Preempted(request.request_id, lost, freed))

    def _new_request_data(self, request: Request, num_scheduled: dict[str, int]) -> NewRequestData:
        request.num_tokens_sent_to_runner = request.num_tokens
        return NewRequestData(
            req_id=request.request_id,
            token_ids=request.all_token_ids,
            num_prompt_tokens=request.num_prompt_tokens,
            sampling_params=request.sampling_params,
            eos_token_ids=request.eos_token_ids,
            block_ids=self.kv.block_ids(request.request_id),
            num_computed_tokens=request.num_computed_tokens,
        )

    @staticmethod
    def _cached_request_data(requests: list[Request], new_blocks: dict[str, list[int]]) -> CachedRequestData:
        data = CachedRequestData()
        for request in requests:
            data.req_ids.append(request.request_id)
            data.new_token_ids.append(request.tokens(request.num_tokens_sent_to_runner, request.num_tokens))
            data.new_block_ids.append(new_blocks[request.request_id])
            data.num_computed_tokens.append(request.num_computed_tokens)
            request.num_tokens_sent_to_runner = request.num_tokens
        return data

    @staticmethod
    def _advance_progress(output: SchedulerOutput, requests: list[Request]) -> None:
        """Count the plan's tokens as computed, and split them into prefill and decode work."""
        for request in requests:
            n = output.num_scheduled_tokens[request.request_id]
            is_decode = n == 1 and request.num_output_tokens > 0 and request.num_computed_tokens == request.num_tokens - 1
            if is_decode:
                output.num_decode_tokens += 1
            else:
                output.num_prefill_tokens += n
            request.num_computed_tokens += n

    # ---- update ----------------------------------------------------------------------------

    def update_from_output(
        self,
        output: SchedulerOutput,
        sampled: dict[str, int],
        logprobs: dict[str, list[Logprob]] | None = None,
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, apply stop conditions, free finished requests' blocks."""
        outputs = self.take_pending_outputs()
        still_running = []
        for request in self.running:
            req_id = request.request_id
            if req_id not in output.num_scheduled_tokens:
                still_running.append(request)
                continue
            token = sampled.get(req_id)
            new_tokens = []
            if token is not None:
                request.output_token_ids.append(token)
                new_tokens.append(token)
                self._check_stop(request, token)
            out = EngineCoreOutput(request_id=req_id, new_token_ids=new_tokens, num_cached_tokens=request.num_cached_tokens)
            if logprobs and req_id in logprobs:
                out.new_logprobs = [logprobs[req_id]]
            first = self.first_scheduled.pop(req_id, None)
            if first is not None:
                out.first_scheduled_time = first
            if request.status.finished:
                out.finish_reason = request.status.value
                out.finish_detail = request.finish_detail
                if request.status is RequestStatus.FINISHED_STOPPED:
                    out.stop_token_id = token
                self._free_finished(request)
            else:
                still_running.append(request)
            if new_tokens or out.finish_reason or out.first_scheduled_time is not None:
                outputs.append(out)
        self.running = still_running
        return outputs

    def _check_stop(self, request: Request, token: int) -> None:
        params = request.sampling_params
        n_out = request.num_output_tokens
        if n_out >= params.min_tokens:
            if not params.ignore_eos and token in request.eos_token_ids:
                request.status, request.finish_detail = RequestStatus.FINISHED_STOPPED, "EOS token"
                return
            if params.stop_token_ids and token in params.stop_token_ids:
                request.status, request.finish_detail = RequestStatus.FINISHED_STOPPED, f"stop token {token}"
                return
        if n_out >= request.max_tokens:
            request.status, request.finish_detail = RequestStatus.FINISHED_LENGTH, f"max_tokens ({request.max_tokens}) reached"
        elif request.num_tokens >= self.max_model_len:
            request.status, request.finish_detail = RequestStatus.FINISHED_LENGTH, f"max_model_len ({self.max_model_len}) reached"

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
                EngineCoreOutput(request_id=req_id, new_token_ids=[], finish_reason=status.value, finish_detail=detail)
            )
            ended.append(req_id)
        return ended

    def fail_step(self, output: SchedulerOutput, detail: str) -> list[str]:
        """The model step that was to compute `output` failed: its requests end with "error", and no
        block it was to fill stays findable by hash (its KV was never written). Returns the ids ended."""
        self.kv.forget_step_blocks()
        return self.finish_requests(list(output.num_scheduled_tokens), RequestStatus.FINISHED_ERROR, detail)

    def reset_prefix_cache(self) -> bool:
        """Forget the prefix cache; refused (False) while any request holds blocks, as in vLLM."""
        return self.kv.reset_prefix_cache()

    def has_unfinished_requests(self) -> bool:
        return bool(self.running) or bool(len(self.waiting))

    def has_pending_outputs(self) -> bool:
        return bool(self._pending_outputs)

    def take_pending_outputs(self) -> list[EngineCoreOutput]:
        """Outputs produced outside a step (aborts, rejections, errors) since the last take."""
        outputs, self._pending_outputs = self._pending_outputs, []
        return outputs

    def drain_step_record(self) -> StepRecord:
        """Everything recorded since the last drain: the last step's admissions, preemptions and
        endings, and what happened between steps (aborts, rejections, errors)."""
        record, self._record = self._record, StepRecord()
        return record

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
                raise AssertionError(f"{request.request_id} computed {request.num_computed_tokens} tokens with {held} blocks")
        for request in self.waiting:
            if request.num_computed_tokens or request.request_id in self.kv.req_to_blocks:
                raise AssertionError(f"waiting request {request.request_id} holds KV state")
