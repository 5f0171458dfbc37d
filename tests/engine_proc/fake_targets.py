"""Stand-ins for run_engine_core that never get to the handshake (spawn targets: keep imports light)."""

import os
import time


def exit_before_ready(config_bytes, addresses, parent_pid, set_pdeathsig) -> None:
    os._exit(3)


def never_ready(config_bytes, addresses, parent_pid, set_pdeathsig) -> None:
    time.sleep(120)
