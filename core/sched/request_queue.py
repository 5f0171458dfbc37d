"""The waiting queue under the two policies: FCFS (a deque) and priority (a heap)."""

import heapq
from collections import deque
from collections.abc import Iterator

from enginetui.core.request import Request


class FCFSQueue:
    """Arrival order; preempted requests are put back at the head."""

    def __init__(self) -> None:
        self._items: deque[Request] = deque()  # head is scheduled first

    def add(self, request: Request) -> None:
        self._items.append(request)

    def prepend(self, request: Request) -> None:
        self._items.appendleft(request)

    def peek(self) -> Request:
        return self._items[0]

    def pop(self) -> Request:
        return self._items.popleft()

    def remove(self, request: Request) -> None:
        self._items.remove(request)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._items)


class PriorityQueue:
    """Lowest (priority, arrival_time, request_id) first, as vLLM orders requests; a preempted
    request goes back to its place by those keys."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, str, Request]] = []  # (priority, arrival, request id, request)

    def add(self, request: Request) -> None:
        heapq.heappush(self._heap, (request.priority, request.arrival_time, request.request_id, request))

    prepend = add  # position is decided by the keys alone

    def peek(self) -> Request:
        return self._heap[0][3]

    def pop(self) -> Request:
        return heapq.heappop(self._heap)[3]

    def remove(self, request: Request) -> None:
        self._heap = [item for item in self._heap if item[3] is not request]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return (item[3] for item in sorted(self._heap, key=lambda item: item[:3]))


def make_queue(policy: str) -> FCFSQueue | PriorityQueue:
    return PriorityQueue() if policy == "priority" else FCFSQueue()
