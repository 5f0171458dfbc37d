"""Where the probe publishes: the ENGINETUI_PROBE environment variable, read inside vLLM's engine process.

    ENGINETUI_PROBE=tcp://127.0.0.1:5600                   # or ipc:///tmp/probe.sock
    ENGINETUI_PROBE='{"endpoint": "tcp://127.0.0.1:5600", "hwm": 64}'   # the JSON form

A data-parallel rank r > 0 publishes on the port + r (tcp; port 0 lets the OS pick) or on the path
+ "_dp<r>" (ipc), as vLLM's KV events do with their endpoint.
"""

import json
import os
from dataclasses import dataclass

from enginetui.core.engine.event_publisher import PUB_SNDHWM

PROBE_ENV = "ENGINETUI_PROBE"


class ProbeConfigError(ValueError):
    """ENGINETUI_PROBE does not say where to publish (the message is one line naming the problem)."""


@dataclass(frozen=True)
class ProbeConfig:
    endpoint: str  # where the XPUB socket binds (tcp://HOST:PORT or ipc://PATH), before the DP offset
    hwm: int = PUB_SNDHWM  # events queued per subscriber before that subscriber's copies are dropped

    def endpoint_for_rank(self, data_parallel_rank: int) -> str:
        """The endpoint of one data-parallel rank."""
        if data_parallel_rank == 0:
            return self.endpoint
        if self.endpoint.startswith("ipc://"):
            return f"{self.endpoint}_dp{data_parallel_rank}"
        base, _, port = self.endpoint.rpartition(":")
        return self.endpoint if int(port) == 0 else f"{base}:{int(port) + data_parallel_rank}"


def parse_probe_config(value: str) -> ProbeConfig:
    """An ENGINETUI_PROBE value (an address, or a JSON object with "endpoint" and optional "hwm")."""
    text = value.strip()
    if text.startswith("{"):
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProbeConfigError(f"{PROBE_ENV} is not valid JSON: {exc}") from None
        unknown = set(fields) - {"endpoint", "hwm"}
        if unknown:
            raise ProbeConfigError(f"{PROBE_ENV} has unknown keys {sorted(unknown)} (known: endpoint, hwm)")
        if "endpoint" not in fields:
            raise ProbeConfigError(f'{PROBE_ENV} JSON needs an "endpoint"')
        hwm = fields.get("hwm", PUB_SNDHWM)
        if not isinstance(hwm, int) or isinstance(hwm, bool) or hwm < 1:
            raise ProbeConfigError(f'{PROBE_ENV} "hwm" must be a positive integer, not {hwm!r}')
        return ProbeConfig(check_endpoint(fields["endpoint"]), hwm)
    return ProbeConfig(check_endpoint(text))


def check_endpoint(endpoint, name: str = f"{PROBE_ENV} endpoint") -> str:
    """`endpoint` if it is tcp://HOST:PORT or ipc://PATH; else ProbeConfigError naming it as `name`."""
    if isinstance(endpoint, str) and endpoint.startswith("ipc://") and len(endpoint) > len("ipc://"):
        return endpoint
    if isinstance(endpoint, str) and endpoint.startswith("tcp://"):
        host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
        if host and port.isdigit() and int(port) < 65536:
            return endpoint
    raise ProbeConfigError(f"{name} {endpoint!r} is not tcp://HOST:PORT or ipc://PATH")


def probe_config_from_env(environ=os.environ) -> ProbeConfig | None:
    """The configured probe (None: ENGINETUI_PROBE unset or empty: the probe stays off)."""
    value = environ.get(PROBE_ENV, "")
    return parse_probe_config(value) if value.strip() else None
