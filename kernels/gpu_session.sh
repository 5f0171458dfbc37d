#!/usr/bin/env bash
# Everything a CUDA machine should run, in two calls of under 10 minutes each (kernels/GPU_NOTES.md):
#
# kernels/gpu_session.sh OUTDIR [kernels]   (about 4-5 minutes on an H200)
#   1. python tools/gpu_check.py: kernel parity, end-to-end greedy parity with transformers,
#      seeded sampling, decode- and prefill-attention speed per launch variant (the 64- and 128-row
#      query tiles on 8 prompts of 2,048 tokens among them);
#   2. the mixed 64-prompt throughput benchmark against transformers.generate, same weights, in
#      float32 and in bfloat16;
#   3. the per-stage step profile at 1/16/64 running requests, in bfloat16.
#
# kernels/gpu_session.sh OUTDIR graphs      (about 6-8 minutes)
#   1. python tools/graph_check.py --shapes llama-3.1-8b qwen3-8b: per model (opt-125m
#      fp32 and bf16, the two 8B shapes in bf16, random weights) the decode CUDA graphs' capture time,
#      greedy tokens with graphs equal to without, decode step time at 1/16/64 running with and
#      without graphs against the HBM floor;
#   2. the mixed throughput benchmark on the Llama-3.1-8B shape in bf16, graphs on (the engine alone:
#      --compare hf would first build and save 8B random weights on the CPU, minutes of the call).
#
# Logs and JSON land in OUTDIR (at most 8 files a call: what the device tool brings back).
# The engine needs msgspec and pyzmq besides torch, triton and transformers; textual is not needed.
set -uo pipefail
out=${1:?usage: kernels/gpu_session.sh OUTDIR [kernels|graphs]}
part=${2:-kernels}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"  # tools/*.py import enginetui from this checkout
model=(--model facebook/opt-125m --load-format dummy --device cuda)
status=0

{
    date -u
    echo "part: $part"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    $py -c "import torch, triton, transformers; print('torch', torch.__version__, '| triton', triton.__version__, '| transformers', transformers.__version__)"
} 2>&1 | tee "$out/machine.txt"

case $part in
kernels)
    timeout 270 $py "$root/tools/gpu_check.py" --json "$out/gpu_check.json" 2>&1 | tee "$out/gpu_check.log" || status=1
    timeout 150 $py -m enginetui bench throughput "${model[@]}" --preset mixed --compare hf --hf-batch-sizes 16 32 64 \
        --json "$out/throughput.json" 2>&1 | tee "$out/throughput.log" || status=1
    timeout 100 $py -m enginetui bench throughput "${model[@]}" --dtype bfloat16 --preset mixed --compare hf \
        --hf-batch-sizes 64 --json "$out/throughput_bf16.json" 2>&1 | tee "$out/throughput_bf16.log" || status=1
    timeout 50 $py -m enginetui bench profile "${model[@]}" --dtype bfloat16 2>&1 | tee "$out/profile_bf16.log" || status=1
    summaries=("$out/throughput.log" "$out/throughput_bf16.log" "$out/profile_bf16.log")
    check_log=$out/gpu_check.log
    ;;
graphs)
    timeout 300 $py "$root/tools/graph_check.py" --shapes llama-3.1-8b qwen3-8b --json "$out/graph_check.json" 2>&1 \
        | tee "$out/graph_check.log" || status=1
    shapes=$(mktemp -d)
    llama=$($py -c "from enginetui.core.models.known_configs import shape_dir; print(shape_dir('llama-3.1-8b', '$shapes'))")
    timeout 200 $py -m enginetui bench throughput --model "$llama" --load-format dummy --device cuda --dtype bfloat16 \
        --max-model-len 4096 --disable-detokenize --preset mixed --json "$out/throughput_8b.json" 2>&1 \
        | tee "$out/throughput_8b.log" || status=1
    rm -rf "$shapes"
    summaries=("$out/throughput_8b.log")
    check_log=$out/graph_check.log
    ;;
*)
    echo "unknown part $part: kernels or graphs" >&2
    exit 2
    ;;
esac

# The summaries last, where a truncated log still shows them.
echo
grep -E '^\| |^(PASS|FAIL) in' "$check_log"
tail -n 1 "${summaries[@]}"
echo "gpu_session $part: exit $status"
exit $status
