"""The wait for a quiet machine before each timed pass, on a fake sampler and clock."""

from enginetui.bench import quiet


class FakeMachine:
    """Busy shares to report, one per sample; each sample advances the clock by its length."""

    def __init__(self, shares: list[float]) -> None:
        self.shares = list(shares)  # what the next samples report (the last one repeats)
        self.now = 0.0  # the fake clock, seconds
        self.samples = 0  # samples taken

    def sample(self, seconds: float) -> float:
        self.now += seconds
        self.samples += 1
        return self.shares.pop(0) if len(self.shares) > 1 else self.shares[0]

    def clock(self) -> float:
        return self.now


def test_a_quiet_machine_costs_two_samples():
    machine = FakeMachine([0.02])
    assert quiet.wait_until_quiet(machine.sample, machine.clock)
    assert machine.samples == quiet.QUIET_SAMPLES


def test_waits_for_consecutive_quiet_samples_after_the_load_ends():
    machine = FakeMachine([0.9, 0.5, 0.05, 0.6, 0.1, 0.03])  # a spill, one quiet blip, then quiet
    assert quiet.wait_until_quiet(machine.sample, machine.clock)
    assert machine.samples == 6


def test_a_machine_that_stays_busy_is_reported_and_the_pass_runs(capsys):
    machine = FakeMachine([0.99])
    assert not quiet.wait_until_quiet(machine.sample, machine.clock)
    assert machine.now >= quiet.TIMEOUT_S
    assert "still busy" in capsys.readouterr().err


def test_the_real_sampler_reads_a_share():
    assert 0.0 <= quiet.busy_share(0.05) <= 1.0
