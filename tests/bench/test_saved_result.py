"""The run record a benchmark writes (--json, --save-result): the machine, the command, the commit, the date,
every pass and the figures compared; from a real tiny run against the stand-in vLLM."""

import datetime
import json
import re

import pytest

from enginetui.bench import saved_result
from tests.bench.small_runs import SMALL_WORKLOAD, bench_args

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
"""
SAPPHIRE_RAPIDS = """vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""


def test_the_cpu_is_named_by_its_line_and_microarchitecture_with_the_flags_that_matter():
    zen4 = saved_result.machine(ZEN4)
    assert (zen4["label"], zen4["vendor"], zen4["family"], zen4["model"]) == ("AMD EPYC Zen 4", "AuthenticAMD", 25, 17)
    assert zen4["flags"] == {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx": False}
    assert zen4["model_name"] == "AMD EPYC 9R14 96-Core Processor" and zen4["cores"] >= 1
    spr = saved_result.machine(SAPPHIRE_RAPIDS)
    assert spr["label"] == "Intel Xeon, Sapphire Rapids" and spr["flags"]["amx"]
    unknown = saved_result.machine(ZEN4.replace("cpu family\t: 25", "cpu family\t: 99"))
    assert unknown["label"] == "AMD EPYC, family 99 model 17"  # not in the table: the line, family and model
    masked = saved_result.machine(SAPPHIRE_RAPIDS.replace("143", "167").replace("Platinum 8488C", "Processor"))
    assert masked["label"] == "Intel Xeon, family 6 model 167"  # a hypervisor's name for the CPU
    odd = saved_result.machine(ZEN4.replace("AMD EPYC 9R14", "Some").replace("cpu family\t: 25", "cpu family\t: 99"))
    assert odd["label"] == "Some 96-Core Processor"  # no product line known: the model name
    assert saved_result.machine("")["label"] == "unknown CPU"
    assert saved_result.slug("2026-12-08-0102", masked["label"], "fleet-accuracy", None) == (
        "2026-12-08-0102-intel-xeon-family-6-model-167-fleet-accuracy"  # every record's file name the same way
    )


def test_a_benchmark_writes_its_record_with_every_field(tiny_opt_dir, fake_vllm, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENGINETUI_MULTIPROC", "0")
    path, folder = tmp_path / "tp.json", tmp_path / "results"
    argv = [
        "bench",
        "throughput",
        "--model",
        tiny_opt_dir,
        *SMALL_WORKLOAD,
        "--compare",
        "vllm",
        "--vllm-cores",
        "all",
        "--temperature",
        "0",
        "--json",
        str(path),
        "--save-result",
        "--result-dir",
        str(folder),
    ]
    args = bench_args("throughput", tiny_opt_dir, *argv[4:])
    args.argv = argv
    before = datetime.datetime.now(datetime.UTC)
    assert args.func(args) == 0
    data = json.loads(path.read_text())
    saved = list(folder.iterdir())
    assert len(saved) == 1 and json.loads(saved[0].read_text()) == data
    assert capsys.readouterr().out.strip().splitlines()[-1] == data["summary"]

    run = data["provenance"]
    assert run["benchmark"] == "throughput" and run["command"] == "enginetui " + " ".join(argv)
    assert re.fullmatch(r"[0-9a-f]{40}", run["commit"]) and isinstance(run["dirty"], bool) and run["version"]
    days = {moment.strftime("%Y-%m-%d") for moment in (before, datetime.datetime.now(datetime.UTC))}
    assert run["date"] in days and re.fullmatch(r"\d\d:\d\d-\d\d:\d\d", run["time_utc"])
    assert run["source"] == "measured" and run["cpu_isa"] is None
    assert run["machine"] == saved_result.machine()
    assert set(run["machine"]) == {"model_name", "vendor", "family", "model", "flags", "cores", "label"}
    assert (
        saved[0].name
        == f"{run['date']}-{run['time_utc'][:5].replace(':', '')}-"
        + re.sub(r"[^a-z0-9.]+", "-", run["machine"]["label"].lower())
        + "-throughput-custom-fp32.json"
    )

    assert len(data["runs"]) == len(data["vllm_runs"]) == 1  # every pass, as the result has them
    figures = data["figures"]
    assert (figures["kind"], figures["workload"], figures["dtype"], figures["passes"]) == (
        "throughput",
        "custom",
        "float32",
        1,
    )
    [row] = figures["rows"]
    ours, vllm = data["runs"][0]["output_tokens_per_s"], data["vllm_runs"][0]["output_tokens_per_s"]
    assert row["ours_output_tok_s"] == [ours, ours] and row["vllm_output_tok_s"] == [vllm, vllm]
    assert row["vllm_cores"] == "all" and row["load"] == "none"
    assert row["ours_vs_vllm"] == pytest.approx(ours / vllm) == data["vllm_ratio"]["vllm-all"]
    assert figures["greedy_identical"] == "{identical_requests}/{num_requests}".format(**data["vllm_agreement"])


def test_a_taken_name_gets_a_number_and_the_flags_are_vllms(tmp_path, tiny_opt_dir):
    data = {
        "provenance": {
            "date": "2026-12-06",
            "time_utc": "11:20-11:45",
            "machine": {"label": "AMD EPYC Zen 4"},
            "cpu_isa": "avx2",
        },
        "figures": {
            "kind": "throughput",
            "workload": "mixed",
            "dtype": "bfloat16",
            "rows": [{"load": "none"}, {"load": "busy"}],
        },
    }
    first, second = saved_result.save(data, str(tmp_path), None), saved_result.save(data, str(tmp_path), None)
    assert first.name == "2026-12-06-1120-amd-epyc-zen-4-throughput-mixed-bf16-avx2-busy.json"
    assert second.name == first.name.replace(".json", "-2.json")
    assert saved_result.save(data, str(tmp_path), "mine.json").name == "mine.json"
    args = bench_args("ops", tiny_opt_dir, "--save-result")
    assert (args.save_result, args.result_dir, args.result_filename) == (True, "results", None)


def test_ops_figures_are_each_shapes_medians_and_ratios_as_the_results_tables_read_them():
    from enginetui.bench.ops import OpsPass, OpsResult, OpsRow

    def one(engine: str, repeat: int, step: float, gemm: float) -> OpsPass:
        return OpsPass(engine, repeat, [step], step, {"gemm": gemm, "attention": 0.001}, [])

    row = OpsRow(
        8,
        512,
        [one("ours", 0, 10.0, 6.0), one("vllm", 0, 8.0, 4.0), one("ours", 1, 12.0, 6.0), one("vllm", 1, 8.0, 4.0)],
    )
    row.median_ms = {
        "ours": {"step": 11.0, "gemm": 6.0, "attention": 0.001},
        "vllm": {"step": 8.0, "gemm": 4.0, "attention": 0.001},
    }
    result = OpsResult("m", {}, "cpu", "float32", 512, 5, 10, 1.0, vllm_version="0.32", rows=[row])
    figures = saved_result.figures(result)
    assert (figures["kind"], figures["passes"], figures["input_len"]) == ("ops", 2, 512)
    [shape] = figures["shapes"]
    assert (shape["batch_size"], shape["prompt_len"]) == (8, 512)
    assert shape["ms"] == {"step": [11.0, 8.0], "gemm": [6.0, 4.0], "attention": [0.001, 0.001]}
    assert shape["ratio"] == {"step": 11.0 / 8.0, "gemm": 1.5}  # no ratio of a kind vLLM spends no time in


@pytest.mark.parametrize(
    "flags", [["--json", "{tmp}/missing/run.json"], ["--save-result", "--result-dir", "{tmp}/file"]]
)
def test_a_record_that_could_not_be_written_stops_the_benchmark_before_it_runs(tmp_path, capsys, flags):
    from enginetui.cli import main

    (tmp_path / "file").write_text("not a folder")
    assert main(["bench", "throughput", *(f.format(tmp=tmp_path) for f in flags)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("enginetui bench throughput: error: --")
