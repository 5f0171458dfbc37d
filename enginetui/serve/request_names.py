"""Request ids as an attached dashboard shows them, and as the served engine knows them.

The dashboard names its own requests r1, r2, ... (the app's rule). On a served engine everyone's
ids share one namespace, so an attached dashboard sends its r1 as `cmpl-<tag>-r1` (tag: random
per dashboard; the server makes `cmpl-<X-Request-Id>`). The dashboard hosting the server
(`enginetui --serve`) runs its requests in the engine under their bare names, r1, r2, ..., which
would collide with this dashboard's own: they are shown as `host-r1`, `host-r2`, ... Everyone
else's ids (`cmpl-…`, `chatcmpl-…`, other dashboards' `cmpl-<tag>-r1`) are shown as they are.
"""

import re

import msgspec

from enginetui.core.engine.events import StepEvent

OWN_ID = re.compile(r"r\d+")  # the app's names for its own requests
HOST_PREFIX = "host-"  # shown before the ids of requests typed in the dashboard hosting the server


class RequestNames:
    """This dashboard's names <-> the engine's request ids."""

    def __init__(self, tag: str) -> None:
        self.tag = tag  # random per dashboard: keeps its ids unique among everyone's
        self._prefix = f"cmpl-{tag}-"  # engine ids of this dashboard's requests start so

    def header(self, local_id: str) -> str:
        """The X-Request-Id the server makes the engine id `cmpl-<tag>-<local id>` from."""
        return f"{self.tag}-{local_id}"

    def engine(self, local_id: str) -> str:
        """The engine's id of the request this dashboard shows as `local_id`."""
        if OWN_ID.fullmatch(local_id):
            return self._prefix + local_id
        if local_id.startswith(HOST_PREFIX) and OWN_ID.fullmatch(local_id[len(HOST_PREFIX) :]):
            return local_id[len(HOST_PREFIX) :]
        return local_id

    def local(self, engine_id: str) -> str:
        """How this dashboard shows the engine's request `engine_id`."""
        if engine_id.startswith(self._prefix):
            return engine_id[len(self._prefix) :]
        if OWN_ID.fullmatch(engine_id):
            return HOST_PREFIX + engine_id
        return engine_id

    def local_event(self, event: StepEvent) -> StepEvent:
        """The event with every request id as this dashboard shows it."""
        name = self.local

        def renamed(items: list) -> list:
            return [msgspec.structs.replace(item, req_id=name(item.req_id)) for item in items]

        return msgspec.structs.replace(
            event,
            scheduled={name(k): v for k, v in event.scheduled.items()},
            new_token_ids={name(k): v for k, v in event.new_token_ids.items()},
            added=renamed(event.added),
            admitted=renamed(event.admitted),
            chunks=renamed(event.chunks),
            running=renamed(event.running),
            waiting=renamed(event.waiting),
            preempted=renamed(event.preempted),
            finished=renamed(event.finished),
            rejected=renamed(event.rejected),
        )
