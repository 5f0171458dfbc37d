"""vLLM's own schedulers with the probe in them: each hook runs vLLM's code unchanged, then the probe reads.

Imported in vLLM's engine process when a deployment names `--scheduler-cls
enginetui.vllm_probe.ProbeScheduler` (or `ProbeAsyncScheduler`, which keeps vLLM's asynchronous
scheduling: with a synchronous scheduler class vLLM turns it off). With ENGINETUI_PROBE unset,
bad, or its address taken, the class is vLLM's scheduler and nothing more (one log line says why).
"""

import vllm
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from enginetui.vllm_probe.config import PROBE_ENV, ProbeConfigError, probe_config_from_env
from enginetui.vllm_probe.probe import Probe, log

KNOWN_VLLM = ("0.30", "0.31", "0.32")  # minor versions whose scheduler the probe's tests ran against


class ProbeScheduler(Scheduler):
    """vLLM's synchronous Scheduler, publishing step events (its hooks serve ProbeAsyncScheduler too)."""

    _enginetui_probe: Probe | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._enginetui_probe = _start_probe(self)

    def _probe(self) -> Probe | None:
        probe = self._enginetui_probe
        return probe if probe is not None and probe.enabled else None

    def schedule(self, *args, **kwargs):
        if probe := self._probe():
            probe.call(probe.before_schedule, self)
        out = super().schedule(*args, **kwargs)
        if probe := self._probe():
            probe.call(probe.after_schedule, self, out)
        return out

    def update_from_output(self, scheduler_output, model_runner_output):
        if probe := self._probe():
            probe.call(probe.before_update, self, scheduler_output)
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        if probe := self._probe():
            probe.call(probe.after_update, self, scheduler_output, outputs)
        return outputs

    def add_request(self, request) -> None:
        is_new = request.request_id not in self.requests
        super().add_request(request)
        if probe := self._probe():
            probe.call(probe.after_add, self, request, is_new)

    def finish_requests(self, request_ids, finished_status):
        ended = super().finish_requests(request_ids, finished_status)
        if ended and (probe := self._probe()):
            probe.call(probe.after_finish, self, ended)
        return ended

    def _preempt_request(self, request, *args, **kwargs) -> None:
        if probe := self._probe():
            probe.call(probe.before_preempt, self, request)
        super()._preempt_request(request, *args, **kwargs)

    def reset_prefix_cache(self, *args, **kwargs) -> bool:
        done = super().reset_prefix_cache(*args, **kwargs)
        if probe := self._probe():
            probe.call(probe.after_reset_prefix_cache, self)
        return done

    def shutdown(self) -> None:
        super().shutdown()
        if self._enginetui_probe is not None:
            self._enginetui_probe.close()


class ProbeAsyncScheduler(ProbeScheduler, AsyncScheduler):
    """vLLM's AsyncScheduler, publishing step events (ProbeScheduler's hooks call on into AsyncScheduler's)."""


def _start_probe(scheduler) -> Probe | None:
    """The probe for this scheduler, or None (with one log line saying why not)."""
    version = ".".join(vllm.__version__.split(".")[:2])
    if version not in KNOWN_VLLM:
        log.warning(
            "enginetui probe: vLLM %s is not a version it was tested with (%s); its events may be incomplete",
            vllm.__version__,
            ", ".join(KNOWN_VLLM),
        )
    try:
        config = probe_config_from_env()
    except ProbeConfigError as exc:
        log.error("enginetui probe: %s; not publishing", exc)
        return None
    if config is None:
        log.warning(
            "enginetui probe: %s is not set; not publishing (set it to tcp://127.0.0.1:PORT or ipc://PATH)", PROBE_ENV
        )
        return None
    parallel = scheduler.parallel_config
    rank = getattr(parallel, "data_parallel_index", None) or getattr(parallel, "data_parallel_rank", 0) or 0
    try:
        probe = Probe(config, rank, async_class=isinstance(scheduler, AsyncScheduler))
    except Exception as exc:  # the address is taken or cannot be bound: vLLM serves without the probe
        log.error("enginetui probe: cannot publish on %s (%s); not publishing", config.endpoint_for_rank(rank), exc)
        return None
    log.info("enginetui probe: publishing step events on %s", probe.address)
    return probe
