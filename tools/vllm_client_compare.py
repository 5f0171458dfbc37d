"""vLLM's own benchmark client against `enginetui serve`, beside `enginetui bench serve` on the same server.

Starts one server (the embedded model unless engine flags follow `--`), then the two clients take turns,
--repeats passes each, on the same fixed-length random requests (EOS ignored, all sent at once), and
prints each pass's TTFT and TPOT (median, mean) and whether vLLM's client's medians fall within the spread
of ours. Run it alone on the machine.

    python tools/vllm_client_compare.py --vllm-python .vllm-venv/bin/python --json out.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from enginetui.bench import saved_result
from enginetui.serve.process import ServeProcess

VLLM_CLIENT = (
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
    "p = P(); add_cli_args(p); main(p.parse_args())"
)


def ours(url: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "enginetui", "bench", "serve", "--base-url", url, "--json", str(out)]
    cmd += ["--input-len", str(args.input_len), "--output-len", str(args.output_len), "--range-ratio", "0"]
    cmd += ["--num-prompts", str(args.num_prompts)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    run = json.loads(out.read_text())["run"]
    return {
        "ttft_median": run["ttft_ms"]["p50"],
        "ttft_mean": run["ttft_ms"]["mean"],
        "tpot_median": run["tpot_ms"]["p50"],
        "tpot_mean": run["tpot_ms"]["mean"],
        "output_tok_s": run["output_tokens_per_s"],
    }


def vllms(url: str, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    name = "vllm-client.json"
    cmd = [args.vllm_python, "-c", VLLM_CLIENT, "--backend", "openai", "--base-url", url]
    cmd += ["--dataset-name", "random", "--random-input-len", str(args.input_len)]
    cmd += ["--random-output-len", str(args.output_len), "--random-range-ratio", "0", "--ignore-eos"]
    cmd += ["--num-prompts", str(args.num_prompts), "--save-result", "--result-dir", str(folder)]
    cmd += ["--result-filename", name, "--disable-tqdm"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    res = json.loads((folder / name).read_text())
    if res["completed"] != args.num_prompts:
        raise SystemExit(f"vLLM's client completed {res['completed']} of {args.num_prompts} requests")
    return {
        "ttft_median": res["median_ttft_ms"],
        "ttft_mean": res["mean_ttft_ms"],
        "tpot_median": res["median_tpot_ms"],
        "tpot_mean": res["mean_tpot_ms"],
        "output_tok_s": res["output_throughput"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python", required=True, help="vLLM's interpreter (its benchmark client)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--json", metavar="PATH", help="also write every pass and the machine as JSON")
    parser.add_argument("engine_args", nargs="*", help="after --: `enginetui serve` flags")
    args = parser.parse_args()
    passes: dict[str, list[dict[str, float]]] = {"enginetui bench serve": [], "vllm bench serve": []}
    server = ServeProcess(*args.engine_args)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for _ in range(args.repeats):
                passes["enginetui bench serve"].append(ours(server.url, args, folder / "ours.json"))
                passes["vllm bench serve"].append(vllms(server.url, args, folder))
    finally:
        server.stop()
    print(f"{args.num_prompts} requests, {args.input_len} prompt / {args.output_len} output tokens, all at once")
    print(f"{'client':<22} {'TTFT p50':>9} {'TTFT mean':>10} {'TPOT p50':>9} {'TPOT mean':>10} {'out tok/s':>10}")
    for client, runs in passes.items():
        for run in runs:
            print(
                f"{client:<22} {run['ttft_median']:>9.1f} {run['ttft_mean']:>10.1f} {run['tpot_median']:>9.2f}"
                f" {run['tpot_mean']:>10.2f} {run['output_tok_s']:>10.1f}"
            )
    verdict = {}
    for key in ("ttft_median", "tpot_median"):
        ours_span = [run[key] for run in passes["enginetui bench serve"]]
        theirs = [run[key] for run in passes["vllm bench serve"]]
        inside = all(min(ours_span) <= value <= max(ours_span) for value in theirs)
        verdict[key] = {"ours": [min(ours_span), max(ours_span)], "vllm_client": theirs, "within": inside}
        print(f"{key}: ours {min(ours_span):.2f}-{max(ours_span):.2f}, vLLM's client {theirs}: within={inside}")
    if args.json:
        data = {"args": vars(args), "passes": passes, "verdict": verdict}
        data |= {"machine": saved_result.machine(), "source": saved_result.source()}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
