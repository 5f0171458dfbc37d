"""Re-running a recorded run in the simulator on its own clock: the exactness check of
`enginetui simulate --from-recording FILE --step-times recorded`."""

import msgspec

from core.record.reader import read_recording
from enginetui.simulate.from_recording import recorded_run
from enginetui.simulate.simulator import SimRun, Simulator
from enginetui.simulate.step_events import StepEventWriter
from enginetui.simulate.step_time import ReplayedStepTimes


def replay_recording(path: str, record: str | None = None) -> SimRun:
    """Simulate the recording's workload with its engine flags, pool and recorded step times; with
    `record`, write the simulated run as a recording too."""
    run = recorded_run(path)
    writer = None
    if record is not None:
        info = msgspec.structs.replace(read_recording(path).header.engine, device="simulated", pid=0)
        writer = StepEventWriter(record, run.config, info, source=f"enginetui simulate --from-recording {path}")
    try:
        sim = Simulator(run.config, run.num_blocks, run.max_model_len, ReplayedStepTimes(run.steps), writer)
        return sim.run(run.requests)
    finally:
        if writer is not None:
            writer.close()
