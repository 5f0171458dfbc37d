"""The thread governor: one thread while other processes keep the compute threads waiting for a
core, every thread again after a while; driven by a fake clock and fake run-delay readings."""

from enginetui.core.worker import thread_governor as tg
from enginetui.core.worker.thread_governor import ThreadGovernor, threads_run_delay_s


class Machine:
    """A clock and the run delay the compute threads accumulate while the engine steps."""

    def __init__(self) -> None:
        self.now = 0.0  # seconds
        self.delay = 0.0  # seconds of run delay so far
        self.set_to: list[int] = []  # thread counts the governor applied

    def run(self, gov: ThreadGovernor, seconds: float, waiting_share: float, step_s: float = 0.05) -> None:
        """Step for `seconds`, each compute thread waiting `waiting_share` of the time."""
        for _ in range(round(seconds / step_s)):
            self.now += step_s
            self.delay += step_s * waiting_share * gov.threads
            gov.after_step()

    def governor(self, threads: int = 2) -> ThreadGovernor:
        return ThreadGovernor(
            threads, read_delay=lambda: self.delay, clock=lambda: self.now, set_threads=self.set_to.append
        )


def test_alone_or_beside_a_light_load_it_keeps_every_thread():
    m = Machine()
    gov = m.governor()
    m.run(gov, 30, waiting_share=0.0)
    m.run(gov, 30, waiting_share=0.08)  # a dashboard redrawing beside the engine
    assert gov.threads == 2 and m.set_to == []


def test_a_blip_of_one_contended_window_keeps_every_thread():
    m = Machine()
    gov = m.governor()
    m.run(gov, 1.2, waiting_share=0.5)  # another engine's last second
    m.run(gov, 10, waiting_share=0.0)
    m.run(gov, 1.2, waiting_share=0.5)  # and again, later: never two windows in a row
    m.run(gov, 10, waiting_share=0.0)
    assert gov.threads == 2 and m.set_to == []


def test_a_busy_neighbour_drops_it_to_one_thread_and_it_retries_every_thread_later():
    m = Machine()
    gov = m.governor()
    m.run(gov, 2.5, waiting_share=0.33)  # one busy process: each of 2 threads waits a third of the time
    assert gov.threads == 1 and m.set_to == [1]
    m.run(gov, tg.RETRY_S - 2, waiting_share=0.0)  # one thread beside it: no waiting, but not yet
    assert gov.threads == 1
    m.run(gov, 2, waiting_share=0.0)  # the neighbour is gone when it tries again
    assert m.set_to == [1, 2]
    m.run(gov, 30, waiting_share=0.0)
    assert gov.threads == 2 and gov.switches == 2


def test_idle_time_does_not_dilute_a_window_and_new_work_starts_with_every_thread():
    m = Machine()
    gov = m.governor()
    m.now += 100  # idle
    gov.idle()
    m.run(gov, 2.5, waiting_share=0.33)
    assert gov.threads == 1
    m.now += 1  # idle a moment; then new work
    gov.idle()
    assert gov.threads == 2 and m.set_to == [1, 2]


def test_the_run_delay_of_this_process_is_read_from_the_kernel():
    assert threads_run_delay_s() >= 0.0


def test_the_child_gets_a_governor_only_for_a_thread_count_of_its_own(monkeypatch):
    import torch

    from enginetui.core.worker.cpu_threads import ADAPT_ENV, thread_governor

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        monkeypatch.delenv(ADAPT_ENV, raising=False)
        assert thread_governor() is None  # --cpu-threads or OMP_NUM_THREADS given: kept as given
        monkeypatch.setenv(ADAPT_ENV, "1")
        gov = thread_governor()
        assert gov is not None and gov.max_threads == 2
        torch.set_num_threads(1)
        assert thread_governor() is None  # one thread has nothing to adapt
    finally:
        torch.set_num_threads(before)
