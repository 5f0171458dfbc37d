"""Timeline panel: one lane per recent request, one column per engine step, ending at the latest.

    step   |120      |130      |140
    r3     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━✓
  ▶ r4     ···███━━━━━━━━━✖······██━━━━━━━━━
    r5        ·······██━━━━━━━━━━━━━━━━━⊣

Each cell says what the request did in that step (a legend of the cells drawn is below them); the
selected request's lane is highlighted. With asynchronous scheduling a lane's cell is the step's
plan, and two rows under the ruler give, per engine step, the step it planned and the step that
executed meanwhile (last digit): the plan of step N+1 is made while step N executes.

    plan   123456789
    exec    12345678

The columns follow the run: the right edge is the latest step (in replay, the step shown).
"""

from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget

from enginetui.dashboard.timeline import DECODE, PREFILL, RECOMPUTE, REQUEUED, STALLED, WAITING, Lane, Timeline
from enginetui.dashboard.widgets.legend import legend_lines
from enginetui.dashboard.widgets.palette import DIM, STATUS_STYLES
from enginetui.dashboard.widgets.step_panel import DECODE_STYLE, PREFILL_STYLE
from enginetui.dashboard.widgets.styled_runs import append_runs

PHASE_CELLS = {  # phase -> (glyph, style)
    WAITING: ("·", DIM),
    PREFILL: ("█", PREFILL_STYLE),
    DECODE: ("━", DECODE_STYLE),
    STALLED: ("┄", DECODE_STYLE),
    REQUEUED: ("·", "#e06c75"),
    RECOMPUTE: ("█", "#d19a66"),
}
PREEMPT_CELL = ("✖", "bold #e06c75")
END_CELLS = {  # finish reason -> (glyph, style)
    "stop": ("✓", STATUS_STYLES["finished"]),
    "length": ("⊣", STATUS_STYLES["finished"]),
    "abort": ("✗", STATUS_STYLES["aborted"]),
    "error": ("!", STATUS_STYLES["error"]),
    "rejected": ("⊘", STATUS_STYLES["rejected"]),
}
UNKNOWN_END = ("■", DIM)  # an end whose reason this dashboard does not know
MEANINGS = {  # every cell the panel draws -> what it means, in legend order
    PHASE_CELLS[WAITING]: "waiting",
    PHASE_CELLS[PREFILL]: "prefill",
    PHASE_CELLS[DECODE]: "decode",
    PHASE_CELLS[STALLED]: "running, no tokens",
    PREEMPT_CELL: "preempted",
    PHASE_CELLS[REQUEUED]: "waiting again",
    PHASE_CELLS[RECOMPUTE]: "recompute",
    END_CELLS["stop"]: "stop",
    END_CELLS["length"]: "length",
    END_CELLS["abort"]: "abort",
    END_CELLS["error"]: "error",
    END_CELLS["rejected"]: "rejected",
    UNKNOWN_END: "ended",
}
MAX_LEGEND_LINES = 2  # rows the legend may take below the lanes
SELECTED_ROW = "on #2c313a"
RULER_EVERY = 10  # steps between ruler marks
MAX_LABEL = 12  # widest request id shown in full


def lane_cells(lane: Lane, first: int, last: int) -> list[tuple[str, str] | None]:
    """The lane's cells for steps first..last (None: nothing there)."""
    cells: list[tuple[str, str] | None] = [None] * (last - first + 1)
    for phase, a, b in lane.segments:
        for step in range(max(a, first), min(b, last) + 1):
            cells[step - first] = PHASE_CELLS[phase]
    for step in lane.preemptions:
        if first <= step <= last:
            cells[step - first] = PREEMPT_CELL
    if lane.end is not None and first <= lane.end[0] <= last:
        cells[lane.end[0] - first] = END_CELLS.get(lane.end[1], UNKNOWN_END)
    return cells


def visible_lanes(timeline: Timeline, first: int, last: int, rows: int, selected: str | None) -> list[Lane]:
    """The newest lanes that overlap steps first..last, at most `rows`, the selected one kept in."""
    lanes = [
        lane
        for lane in timeline.lanes.values()
        if lane.first_step <= last and (lane.end is None or lane.last_step >= first)
    ]
    if len(lanes) <= rows:
        return lanes
    shown = lanes[-rows:] if rows > 0 else []
    chosen = timeline.lanes.get(selected or "")
    if rows > 0 and chosen in lanes and chosen not in shown:
        shown = [chosen, *shown[1:]]
    return shown


def ruler(first: int, width: int) -> Text:
    """Step numbers above the columns, every RULER_EVERY steps."""
    line = [" "] * width
    step = first + (-first) % RULER_EVERY
    while step - first < width:
        mark = f"|{step}"
        at = step - first
        if at + len(mark) <= width:
            line[at : at + len(mark)] = mark
        step += RULER_EVERY
    return Text("".join(line), style=DIM)


def async_rows(async_steps: dict[int, tuple[int, int]], first: int, last: int, label: int) -> list[Text]:
    """Two rows: per engine step, the last digit of the step it planned and of the step that executed."""
    rows = []
    for name, index, style in (("plan", 0, PREFILL_STYLE), ("exec", 1, DECODE_STYLE)):
        cells = []
        for step in range(first, last + 1):
            number = async_steps.get(step, (0, 0))[index]
            cells.append(str(number % 10) if number else " ")
        rows.append(Text(f"  {name}".ljust(label), style=DIM).append("".join(cells).rstrip(), style=style))
    return rows


class TimelinePanel(Widget):
    """Every recent request's life, aligned to engine steps."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._timeline = Timeline()  # what to draw
        self._colors: dict[str, str] = {}  # req_id -> its colour (as in the other panels)
        self._selected: str | None = None  # the highlighted lane
        self.border_title = "Timeline"

    def show(self, timeline: Timeline, colors: dict[str, str], selected: str | None) -> None:
        self._timeline, self._colors, self._selected = timeline, colors, selected
        self.refresh()

    def _hide_key(self) -> str:
        """The app's key for hiding this panel, as its footer names it (^t in the dashboard, t where nothing
        is typed)."""
        for binding in self.app.BINDINGS:
            if isinstance(binding, Binding) and binding.action == "toggle_timeline":
                return self.app.get_key_display(binding)
        return "^t"

    def render(self) -> Text:
        width, height = self.content_size
        timeline = self._timeline
        if not timeline.lanes:
            return Text("no requests yet: each one gets a lane here, one column per engine step", style=DIM)
        label = min(MAX_LABEL, max(len(k) for k in timeline.lanes)) + 3  # "▶ " + id + " "
        columns = max(1, width - label)
        last = timeline.last_step + 1  # room for the end marks of requests that finished at the latest step
        first = max(1, last - columns + 1)
        self.border_title = f"Timeline · steps {first}–{timeline.last_step} · {self._hide_key()} hides"
        head = [Text("step".ljust(label), style=DIM).append_text(ruler(first, min(columns, last - first + 1)))]
        if timeline.async_steps:
            head += async_rows(timeline.async_steps, first, last, label)
        for legend_rows in range(1, MAX_LEGEND_LINES + 1):
            lanes = visible_lanes(timeline, first, last, height - len(head) - legend_rows, self._selected)
            cells = [lane_cells(lane, first, last) for lane in lanes]
            drawn = {cell for row in cells for cell in row if cell}
            entries = [
                (glyph, style, meaning) for (glyph, style), meaning in MEANINGS.items() if (glyph, style) in drawn
            ]
            legend = legend_lines(entries, width)[:MAX_LEGEND_LINES]
            if len(legend) <= legend_rows:
                break
        lines = [*head, *(self._row(lane, row, label) for lane, row in zip(lanes, cells))]
        lines += [Text()] * max(0, height - len(lines) - len(legend))  # the legend sits at the bottom
        return Text("\n", no_wrap=True, overflow="ellipsis").join(lines + legend)

    def _row(self, lane: Lane, cells: list[tuple[str, str] | None], label: int) -> Text:
        selected = lane.req_id == self._selected
        row = Text(no_wrap=True, overflow="ellipsis", style=SELECTED_ROW if selected else "")
        row.append("▶ " if selected else "  ", style="bold")
        name = lane.req_id if len(lane.req_id) <= MAX_LABEL else lane.req_id[: MAX_LABEL - 1] + "…"
        row.append(name.ljust(label - 2), style=f"bold {self._colors.get(lane.req_id, '')}")
        return append_runs(row, (cell or (" ", "") for cell in cells))
