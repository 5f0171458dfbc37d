"""The timeline under asynchronous scheduling: per engine step, the step planned and the step
executing meanwhile, drawn as two rows under the ruler."""

import msgspec

from enginetui.dashboard.timeline import Timeline
from enginetui.dashboard.widgets.step_panel import StepPanel
from enginetui.dashboard.widgets.timeline import async_rows
from tests.dashboard.builders import event, progress


def test_the_plan_and_exec_rows_show_step_n_plus_1_planned_while_step_n_executes():
    a = lambda computed, tokens: progress("a", computed, tokens, prompt=4)  # noqa: E731
    steps = [  # engine step, planned, executed: the first plan fills the queue, the last step only applies
        (1, 1, 0),
        (2, 2, 1),
        (3, 3, 2),
        (4, 0, 3),
    ]
    timeline = Timeline()
    for step, planned, executed in steps:
        e = event(step, scheduled={"a": 4 if step == 1 else 1} if planned else {}, running=[a(3 + step, 4 + step)])
        timeline.apply(msgspec.structs.replace(e, async_scheduling=True, planned_step=planned, executed_step=executed))
    assert timeline.async_steps == {1: (1, 0), 2: (2, 1), 3: (3, 2), 4: (0, 3)}
    plan, execute = async_rows(timeline.async_steps, 1, 5, 8)
    assert plan.plain == "  plan  123"
    assert execute.plain == "  exec   123"
    assert timeline.clone().async_steps == timeline.async_steps


def test_a_synchronous_run_adds_no_rows():
    timeline = Timeline()
    timeline.apply(event(1, scheduled={"a": 4}, running=[progress("a", 4, 5, prompt=4)]))
    assert timeline.async_steps == {}


def test_the_step_panel_names_the_step_planned_and_the_step_executing():
    panel = StepPanel()
    e = event(5, scheduled={"a": 1}, running=[progress("a", 9, 9, prompt=4)])
    panel.show(msgspec.structs.replace(e, async_scheduling=True, planned_step=5, executed_step=4), 0)
    assert panel.border_title == "Step 5 · plan 5 ∥ exec 4"
    panel.show(e, 0)  # synchronous: as before
    assert panel.border_title.startswith("Step 5 · ") and "plan" not in panel.border_title
