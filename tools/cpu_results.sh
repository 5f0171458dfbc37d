#!/usr/bin/env bash
# Every figure of the CPU results rows in docs/results.md (#19), in one go: about 45 minutes on an idle
# 2-core machine. Run it from the repository root with vLLM's interpreter given:
#   ENGINETUI_VLLM_PYTHON=/path/to/vllm-venv/bin/python tools/cpu_results.sh OUTDIR
#   1. the mixed workload (64 prompts, input 32-512, output 32-256, greedy), 3 passes of each: ours
#      headless, beside one busy process and with the dashboard attached; vLLM with its defaults
#      (model on one core) and on both cores, headless and beside the busy process; greedy tokens
#      compared with vLLM's;
#   2. the same in bfloat16 (headless): ours, vLLM with its defaults and on both cores;
#   3. the same workload through transformers.generate (static batches of 8; one pass of ours with it);
#   4. the step profile at 1 / 16 / 64 running decode requests (engine overhead share);
#   5. on a CPU with AVX-512: the mixed workload against vLLM on both cores with both engines on their
#      AVX2 code (--cpu-isa avx2, kernels/cpu_isa.py), 3 passes each.
# Logs and JSON land in OUTDIR (every pass is listed, so the spread shows), each run's record in results/
# too (--save-result: python tools/results.py makes the tables from them); the summaries print last.
set -uo pipefail
out=${1:?usage: tools/cpu_results.sh OUTDIR}
: "${ENGINETUI_VLLM_PYTHON:?set ENGINETUI_VLLM_PYTHON to the python of the vLLM environment}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
model=(--model facebook/opt-125m --load-format dummy)
mixed=("${model[@]}" --preset mixed --temperature 0)
status=0

{
    date -u
    nproc && grep -m1 'model name' /proc/cpuinfo && uptime
    $py -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"
    "$ENGINETUI_VLLM_PYTHON" -c "import vllm; print('vllm', vllm.__version__)" 2>/dev/null
} 2>&1 | tee "$out/machine.txt"

$py -m enginetui bench throughput "${mixed[@]}" --compare vllm --vllm-cores default all \
    --competing none busy dashboard --repeats 3 --json "$out/vllm.json" --save-result 2>&1 | tee "$out/vllm.log" || status=1
$py -m enginetui bench throughput "${mixed[@]}" --dtype bfloat16 --compare vllm --vllm-cores default all \
    --competing none --repeats 3 --json "$out/vllm-bf16.json" --save-result 2>&1 | tee "$out/vllm-bf16.log" || status=1
$py -m enginetui bench throughput "${mixed[@]}" --compare hf --hf-batch-sizes 8 \
    --json "$out/hf.json" --save-result 2>&1 | tee "$out/hf.log" || status=1
$py -m enginetui bench profile "${model[@]}" --json "$out/profile.json" --save-result 2>&1 | tee "$out/profile.log" || status=1
logs=("$out/vllm.log" "$out/vllm-bf16.log" "$out/hf.log" "$out/profile.log")
if grep -qw avx512f /proc/cpuinfo; then
    $py -m enginetui bench throughput "${mixed[@]}" --compare vllm --vllm-cores all --repeats 3 --cpu-isa avx2 \
        --json "$out/vllm-avx2.json" --save-result 2>&1 | tee "$out/vllm-avx2.log" || status=1
    logs+=("$out/vllm-avx2.log")
fi

echo
uptime
tail -n 1 "${logs[@]}"
echo "cpu_results: exit $status"
exit $status
