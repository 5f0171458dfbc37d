"""Every step event an in-process engine publishes, collected by a real subscriber."""

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def recorded_events(engine) -> Iterator[list]:
    """Every event an LLMEngine publishes while the block runs (and until all of it arrived).

    The subscriber's receive queue is unbounded, so a test thread that falls behind still gets
    every event (asserted)."""
    from enginetui.core.engine.event_subscriber import EventSubscriber

    events: list = []
    sub = EventSubscriber(engine.client.events_address, events.append, rcvhwm=0)
    try:
        yield events
        assert sub.catch_up(engine.snapshot().seq), "the last events never arrived"
        assert sub.missed.total == 0, f"{sub.missed.total} events were lost"
    finally:
        sub.close()
