"""Pure rendering helpers of the panels (no running app)."""

import msgspec

from enginetui.core.engine.events import RequestProgress
from enginetui.dashboard.state import LogLine, RequestView
from enginetui.dashboard.widgets.event_log import MIN_HANGING, log_head, log_rows
from enginetui.dashboard.widgets.model_panel import binary_size, short_count
from enginetui.dashboard.widgets.pool_grid import GLYPHS, blocks_per_cell, pool_cells, pool_text
from enginetui.dashboard.widgets.queues import queue_line
from enginetui.dashboard.widgets.request_detail import detail_text
from enginetui.dashboard.widgets.requests_table import first_row, progress, row_note, tail
from enginetui.dashboard.widgets.sparklines import sparkline
from enginetui.dashboard.widgets.step_panel import FEWER_THREADS_STYLE, budget_bar, threads_text
from enginetui.plural import count
from tests.dashboard.builders import event
from tests.dashboard.builders import progress as req_progress


def test_small_pool_gets_a_spaced_cell_per_block():
    e = event(1, running=[req_progress("r1", 20, 21, blocks=[0, 1])], allocated=[1], freed=[5], free=6)
    text, drawn, per_cell = pool_cells(e, {"r1": "#ff0000"}, width=40, height=4)
    assert (drawn, per_cell) == ({"█", "▣", "·", "▫"}, 1)
    assert text.plain == "█ ▣ · · · ▫ · ·"
    styles = {str(span.style) for span in text.spans}
    assert "#ff0000" in styles and "bold #ff0000" in styles


def test_large_pool_groups_blocks_into_cells():
    assert blocks_per_cell(4096, 50, 10) == 9
    assert blocks_per_cell(100, 50, 10) == 1


def test_grouped_cells_show_how_full_each_group_is():
    e = event(1, running=[req_progress("r1", 20, 21, blocks=[0, 1, 2, 3, 4])], free=3)  # 8 blocks
    text, _, per_cell = pool_cells(e, {}, width=4, height=1)  # no room for gaps: 2 blocks per cell
    assert (text.plain, per_cell) == ("██▓·", 2)


def test_grid_wraps_into_rows():
    e = event(1, free=8)
    assert pool_cells(e, {}, width=8, height=2)[0].plain == "· · · ·\n· · · ·"


def test_the_legend_at_the_bottom_explains_every_glyph_the_grid_draws():
    e = event(1, running=[req_progress("r1", 20, 21, blocks=[0, 1, 2, 3, 4, 6])], allocated=[6], free=94)
    e = msgspec.structs.replace(e, num_blocks=100)
    text, per_cell = pool_text(e, {}, width=40, height=2)  # a row of grouped cells, the legend below
    grid, legend = text.plain.split("\n")
    assert per_cell == 3 and grid == "█▓▣" + "·" * 31
    assert legend == "█ used  ▓ half+ used  ▣ new  · free"
    assert all(f"{glyph} {GLYPHS[glyph]}" in legend for glyph in set(grid))


def test_sparkline_scales_to_peak_or_fixed_top():
    assert sparkline([0, 1, 2, 4], 10) == "▁▃▅█"
    assert sparkline([50, 100], 10, top=100.0) == "▅█"
    assert sparkline([1, 2, 3, 4, 5], 2) == "▇█"
    assert sparkline([0, 0], 5) == "▁▁"
    assert sparkline([], 5) == ""


def test_budget_bar_splits_prefill_and_decode():
    bar = budget_bar(prefill=50, decode=10, budget=100, width=12)
    assert bar.plain == "▕█████▒    ▏"  # the unused budget blank (on a grey ground): no glyph to explain
    assert budget_bar(0, 1, 8192, 12).plain == "▕▒         ▏"  # one token still shows


def test_threads_are_named_and_fewer_than_the_engines_highlighted():
    assert threads_text(2, 2).plain == " · 2 threads"
    assert threads_text(1, 0).plain == " · 1 thread"  # an older recording: the engine's count unknown
    fewer = threads_text(1, 2)
    assert fewer.plain == " · 1 of 2 threads"
    assert [span.style for span in fewer.spans] == [FEWER_THREADS_STYLE]
    assert threads_text(0, 2).plain == ""  # no model step on a CPU


def test_queue_line_counts_what_does_not_fit():
    reqs = [RequestProgress(f"r{i}", "waiting", 4, 0, 4, 0, 8, 0, 0, 0, 0.0, []) for i in range(1, 30)]
    assert queue_line("waiting 29", reqs, {}, width=40).plain == "waiting 29   r1 r2 r3 r4 r5 r6 r7 r8 +21"
    assert queue_line("waiting 3", reqs[:3], {}, width=21).plain == "waiting 3    r1 r2 r3"
    assert queue_line("waiting 3", reqs[:3], {}, width=20).plain == "waiting 3    r1 +2"
    pre = RequestProgress("r7", "preempted", 4, 0, 4, 0, 8, 0, 1, 0, 0.0, [])
    assert queue_line("waiting 1", [pre], {}, width=40).plain == "waiting 1    r7(preempted)"
    assert queue_line("running 0/8", [], {}, width=40).plain == "running 0/8  (empty)"


def test_request_rows_say_what_happened_in_words():
    view = RequestView("r1", 0, prompt="Tell me", status="running", num_computed_tokens=80, num_tokens=120)
    view.text = "line one\nline two"
    assert progress(view) == "80/120"
    assert row_note(view, 40).plain == "line one⏎line two"
    assert row_note(view, 8).plain == "…ine two"
    view.status, view.lost_tokens = "preempted", 300
    assert row_note(view, 40).plain.startswith("(lost 300 tok) ")
    view.status, view.finish_reason, view.num_output_tokens = "finished", "length", 48
    assert progress(view) == "48 tok" and row_note(view, 40).plain.startswith("length · ")
    view.status, view.detail = "rejected", "prompt needs 90 blocks > pool 64"
    assert row_note(view, 60).plain == "prompt needs 90 blocks > pool 64"
    assert tail("abcdef", 4) == "…def" and tail("abc", 3) == "abc" and tail("abc", 0) == ""


def test_the_requests_list_keeps_the_newest_rows_and_the_selection_in_view():
    assert first_row(selected=0, rows=5, height=10) == 0  # everything fits
    assert first_row(selected=17, rows=18, height=10) == 8  # newest at the bottom
    assert first_row(selected=10, rows=18, height=10) == 8  # the selection is among the newest: no jump
    assert first_row(selected=3, rows=18, height=10) == 3  # an older selection: it is the top row


def test_counts_are_singular_or_plural():
    assert count(1, "block") == "1 block" and count(0, "block") == "0 blocks" and count(2, "req") == "2 reqs"
    assert count(3, "entry", "entries") == "3 entries"


def test_model_figures_are_short_and_keep_three_digits():
    assert [short_count(n) for n in (512, 12_345, 125_239_296, 1_100_048_384)] == ["512", "12.3K", "125.2M", "1.10B"]
    assert [binary_size(n) for n in (512, 1536, 73_728, 301_989_888, 3 * 2**30)] == [
        "512 B",
        "1.5 KiB",
        "72 KiB",
        "288 MiB",
        "3.0 GiB",
    ]


def test_a_request_the_engine_has_not_listed_shows_as_sent_with_its_prompt_length():
    view = RequestView("r1", 0, prompt="Once upon a time", status="sent", max_tokens=64)
    assert progress(view) == "16 ch"
    text = detail_text(view, None, 16).plain
    assert text == (
        "SENT · not yet listed by the engine · up to 64 tokens to generate\nprompt · 16 characters\nOnce upon a time"
    )
    one = RequestView("r2", 1, prompt="A", status="sent", max_tokens=1)
    assert detail_text(one, None, 16).plain == (
        "SENT · not yet listed by the engine · up to 1 token to generate\nprompt · 1 character\nA"
    )


def test_a_finished_request_says_why_on_a_line_of_its_own():
    view = RequestView(
        "r1",
        0,
        prompt="Once",
        status="finished",
        max_tokens=64,
        num_prompt_tokens=15,
        num_computed_tokens=22,
        num_tokens=23,
        num_output_tokens=8,
        finish_reason="stop",
        detail="EOS token",
    )
    lines = detail_text(view, None, 16).plain.splitlines()
    assert lines[:2] == ["FINISHED · 22/23 tok computed · 8/64 generated", "stop: EOS token"]


LONG = "r12 preempted: the pool is full, so the newest running request gives back its 9 KV blocks and waits again"


def test_a_long_log_line_wraps_whole_under_its_text_column():
    head = log_head(LogLine(3, "preempt", ""))
    lines = log_rows([(head, LONG)], width=50, height=10).plain.split("\n")
    assert len(lines) > 1 and all(len(line) <= 50 for line in lines)
    assert lines[0].startswith("    3 preempt ")
    indent = " " * len(head)
    assert all(line.startswith(indent) and line[len(indent)] != " " for line in lines[1:])  # hanging indent
    assert " ".join(line.strip() for line in lines).endswith(LONG)  # every word shown, none cut


def test_the_log_keeps_the_newest_lines_whole_and_the_start_of_an_older_one():
    rows = [(log_head(LogLine(i, "admit", "")), text) for i, text in enumerate(["old", LONG, "new"])]
    whole = log_rows(rows, width=50, height=10).plain.split("\n")
    assert len(whole) == 5 and whole[0].endswith("old") and whole[-1].endswith("new")  # LONG takes 3 lines
    cut = log_rows(rows, width=50, height=3).plain.split("\n")
    assert cut[0] == whole[1] and cut[1].endswith("…") and cut[1][:-1] == whole[2][:49].rstrip() and cut[2] == whole[-1]
    alone = log_rows(rows[1:2], width=50, height=2).plain.split("\n")  # taller than the panel: its start
    assert len(alone) == 2 and alone[0].startswith("    1 admit") and alone[1].endswith("…")


def test_a_narrow_log_wraps_from_the_left_edge():
    head = log_head(LogLine(3, "preempt", ""))
    width = len(head) + MIN_HANGING - 1
    lines = log_rows([(head, LONG)], width=width, height=20).plain.split("\n")
    assert all(len(line) <= width for line in lines) and not lines[1].startswith(" ")
