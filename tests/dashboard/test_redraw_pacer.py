"""The redraw pacer: timer redraws held back while the dashboard is over its CPU budget."""

from enginetui.dashboard.redraw_pacer import MAX_GAP_S, WINDOW_S, RedrawPacer


class Clocks:
    """Wall and CPU clocks the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 100.0  # seconds
        self.cpu = 5.0  # seconds of this process's CPU time

    def tick(self, wall: float, cpu_share: float) -> None:
        """`wall` seconds pass, the process using `cpu_share` of a core meanwhile."""
        self.wall += wall
        self.cpu += wall * cpu_share


def pacer(budget: float, clocks: Clocks) -> RedrawPacer:
    return RedrawPacer(budget, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)


def test_under_budget_every_tick_draws():
    clocks = Clocks()
    p = pacer(0.10, clocks)
    draws = []
    for _ in range(30):
        draws.append(p.may_draw())
        clocks.tick(0.1, 0.05)
    assert all(draws) and p.cpu_share() <= 0.10


def test_over_budget_draws_once_a_max_gap_and_recovers_when_the_cost_falls():
    clocks = Clocks()
    p = pacer(0.08, clocks)
    drawn_at = []
    for _ in range(50):  # 5 s at 10 ticks a second, the process busy 30% of a core
        if p.may_draw():
            drawn_at.append(clocks.wall)
        clocks.tick(0.1, 0.30)
    late = [t for t in drawn_at if t > drawn_at[0] + WINDOW_S]  # once the window holds only the busy past
    gaps = [b - a for a, b in zip(late, late[1:])]
    assert gaps and all(abs(g - MAX_GAP_S) < 0.11 for g in gaps)  # held back to one redraw per MAX_GAP_S
    for _ in range(int(WINDOW_S / 0.1) + 2):  # the cost falls: the window forgets the busy past
        clocks.tick(0.1, 0.01)
        p.may_draw()
    recovered = []
    for _ in range(10):
        clocks.tick(0.1, 0.01)
        recovered.append(p.may_draw())
    assert all(recovered)


def test_no_budget_never_holds_back():
    clocks = Clocks()
    p = pacer(0.0, clocks)
    for _ in range(20):
        assert p.may_draw()
        clocks.tick(0.1, 1.0)
