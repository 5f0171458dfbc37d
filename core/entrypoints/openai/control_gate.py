"""Who may control a served engine, and how long what they set lasts.

A server lets attached dashboards watch; controlling its engine (pause, resume, step_once, slow
motion, reset_prefix_cache: the ops of core.engine.control that change it) needs
`enginetui serve --allow-control` (and the API key, when one is set: it guards every route).
Reading (snapshot) is always allowed.

What a control changes is everyone's, so it is said in the server's log with who asked (the
dashboard's id, which its request ids also carry, and its address), and it does not outlive
whoever set it:
- a pause ends when the dashboard that made it detaches (its event stream closes), or after
  `max_pause_s` at the latest, whoever made it;
- slow motion ends (full speed again) when the dashboard that set it detaches.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from enginetui.core.engine import control

log = logging.getLogger("uvicorn.error")  # the server's log (access_log.py writes there too)

DEFAULT_MAX_PAUSE_S = 300.0  # the longest a pause lasts unless the server is told otherwise
WATCH_ONLY = (
    "watch only: this server lets dashboards watch its engine, not control it "
    "(start it with `enginetui serve --allow-control` to allow pause, step and slow motion)"
)
DASHBOARD_HEADER = "x-enginetui-dashboard"  # the attached dashboard's id, on its control calls and event stream


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a control call."""

    address: str  # client host:port
    dashboard: str | None  # the attached dashboard's id (None: another client, e.g. curl)

    def __str__(self) -> str:
        return f"dashboard {self.dashboard} ({self.address})" if self.dashboard else self.address


class ControlGate:
    """The served engine's controls, as the server's clients reach them."""

    def __init__(self, engine, allow: bool, max_pause_s: float = DEFAULT_MAX_PAUSE_S) -> None:
        self.engine = engine  # the served engine (AsyncLLM's control interface)
        self.allow = allow  # clients may change the engine (else: watch only)
        self.max_pause_s = max_pause_s  # a pause ends after this many seconds at the latest
        self.pause_holder: Caller | None = None  # who made the current pause (None: not paused by a client)
        self.slow_holder: Caller | None = None  # who set the current slow motion (None: full speed, or not a client)
        self._pause_timer: asyncio.Task | None = None  # ends the current pause at max_pause_s

    async def call(self, op: str, value: Any, caller: Caller) -> Any:
        """Run one control call for `caller`; raises control.ControlFailed (BadControlCall,
        ControlNotAllowed, ...) when it fails."""
        control.check(op, value)
        if control.OPS[op].changes_engine and not self.allow:
            raise control.ControlNotAllowed(WATCH_ONLY)
        result = await self.engine.control(op, value)
        self._note(op, value, caller)
        return result

    async def detached(self, dashboard: str) -> None:
        """A dashboard's event stream closed: what it held ends."""
        if self.pause_holder is not None and self.pause_holder.dashboard == dashboard:
            holder = self.pause_holder
            await self._resume()
            log.warning("engine resumed: %s, which paused it, detached", holder)
        if self.slow_holder is not None and self.slow_holder.dashboard == dashboard:
            holder, self.slow_holder = self.slow_holder, None
            await self.engine.control("set_step_interval", 0.0)
            log.warning("engine at full speed again: %s, which set slow motion, detached", holder)

    def close(self) -> None:
        """The server is stopping: no timer may outlive it."""
        if self._pause_timer is not None:
            self._pause_timer.cancel()

    def _note(self, op: str, value: Any, caller: Caller) -> None:
        if op == "pause":
            self.close()
            self.pause_holder = caller
            self._pause_timer = asyncio.ensure_future(self._end_pause_later(caller))
            ends = "when that dashboard detaches, or " if caller.dashboard else ""
            log.warning(
                "engine paused by %s: requests wait until it resumes (%safter %gs at the latest, --max-pause-s)",
                caller,
                ends,
                self.max_pause_s,
            )
        elif op == "resume":
            self.close()
            self.pause_holder = None
            log.warning("engine resumed by %s", caller)
        elif op == "set_step_interval":
            self.slow_holder = caller if value else None
            log.warning("slow motion set by %s: %s", caller, f"{value:g} s a step" if value else "full speed")
        elif op == "reset_prefix_cache":
            log.warning("prefix cache reset asked by %s", caller)

    async def _end_pause_later(self, holder: Caller) -> None:
        await asyncio.sleep(self.max_pause_s)
        if self.pause_holder is holder:
            self._pause_timer = None  # this task: not to be cancelled by _resume
            await self._resume()
            log.warning("engine resumed: the pause by %s reached %gs (--max-pause-s)", holder, self.max_pause_s)

    async def _resume(self) -> None:
        self.close()
        self.pause_holder = None
        if self.engine.is_running:
            await self.engine.control("resume")
