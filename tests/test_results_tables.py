"""tools/results.py: the results tables of README.md and docs/results.md are what results/*.json give, made the
same way every time; the latest run of a CPU and workload is its figure, every run stays listed."""

import importlib.util
import json
import random
import re

import pytest

from tests.support.checkout import REPO_ROOT

_spec = importlib.util.spec_from_file_location("results_tool", REPO_ROOT / "tools" / "results.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


def test_the_committed_tables_are_what_results_gives():
    texts = {page: page.read_text() for page in tool.TABLES}
    assert tool.pages(tool.load(), texts) == texts, "run python tools/results.py and commit what it changes"
    assert tool.main(["--check"]) == 0


def test_every_marked_table_is_one_the_tool_makes():
    for page, tables in tool.TABLES.items():
        marked = re.findall(r"^<!-- results:begin (\S+) -->$", page.read_text(), flags=re.M)
        assert set(marked) == set(tables), page.name  # a marked table the tool does not make would go unchecked


def test_every_record_says_where_when_and_how_it_was_measured():
    records = tool.load()
    assert records
    for r in records:
        run, machine = r["provenance"], r["provenance"]["machine"]
        assert run["command"] and run["date"] and run["source"], r["file"]
        assert (
            machine["label"] and machine["cores"] and set(machine["flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx"}
        ), r["file"]
        assert r["file"].startswith(run["date"]), r["file"]


def test_the_tables_and_the_plot_come_out_the_same_whatever_the_order_of_the_files(tmp_path):
    records = tool.load()
    texts = {page: page.read_text() for page in tool.TABLES}
    shuffled = [dict(r) for r in records]
    random.Random(0).shuffle(shuffled)
    folder = tmp_path / "results"
    folder.mkdir()
    for r in shuffled:
        (folder / r["file"]).write_text(json.dumps({"provenance": r["provenance"], "figures": r["figures"]}))
    assert tool.pages(tool.load(folder), texts) == tool.pages(records, texts)
    tool.plot(records, tmp_path / "a.png")
    tool.plot(tool.load(folder), tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def _record(date: str, ratio: float, cpu: str = "AMD EPYC Zen 9") -> dict:
    machine = {
        "label": cpu,
        "family": None,
        "model": None,
        "cores": 2,
        "flags": {"avx2": True, "avx512f": True, "avx512_bf16": False, "amx": False},
    }
    row = {
        "load": "none",
        "vllm_cores": "all",
        "ours_output_tok_s": [100.0, 110.0],
        "ours_engine_cores": None,
        "vllm_output_tok_s": [100.0, 100.0],
        "ours_vs_vllm": ratio,
    }
    return {
        "provenance": {
            "command": "enginetui bench throughput",
            "date": date,
            "time_utc": "10:00-10:30",
            "cpu_isa": None,
            "machine": machine,
            "source": "measured",
        },
        "figures": {"kind": "throughput", "workload": "mixed", "dtype": "float32", "passes": 3, "rows": [row]},
    }


def test_the_summary_gives_each_cpus_latest_run_and_the_run_table_every_run(tmp_path):
    for name, data in {
        "b.json": _record("2026-12-07", 1.25),
        "a.json": _record("2026-12-08", 0.75),
        "c.json": _record("2026-12-01", 1.5, cpu="Intel Xeon, Granite Rapids"),
    }.items():
        (tmp_path / name).write_text(json.dumps(data))
    records = tool.load(tmp_path)
    summary = tool.readme_table(records).splitlines()
    assert summary[2].startswith("| AMD EPYC Zen 9 | 0.75x | – |") and summary[2].endswith("| 2026-12-08 |")
    assert summary[3].startswith("| Intel Xeon, Granite Rapids | 1.50x |")  # measured longer ago: below
    runs = tool.throughput_table(records)
    assert runs.index("`b.json`") < runs.index("`a.json`") < runs.index("`c.json`")  # a CPU's runs, oldest first
    assert "| **1.25x** |" in runs and "| 0.75x |" in runs  # bold: ours at least level


def test_a_page_without_its_markers_or_a_broken_record_stops_with_one_line(tmp_path):
    with pytest.raises(SystemExit, match="README.md needs one '<!-- results:begin summary -->'"):
        tool.fill("| a table without markers |\n", "summary", "| new |", "README.md")
    (tmp_path / "x.json").write_text('{"provenance": {}}')
    with pytest.raises(SystemExit, match=r"x.json: not a run record \(KeyError"):
        tool.load(tmp_path)
