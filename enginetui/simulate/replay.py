"""Re-running a recorded run in the simulator on its own clock: what
`enginetui simulate --from-recording FILE --step-times recorded` does, the exactness check."""

from enginetui.simulate.api import simulate
from enginetui.simulate.simulator import SimRun


def replay_recording(path: str, record: str | None = None) -> SimRun:
    """Simulate the recording's workload with its engine flags, pool and recorded step times; with
    `record`, write the simulated run as a recording too."""
    return simulate(from_recording=path, step_times="recorded", record=record).run
