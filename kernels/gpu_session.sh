#!/usr/bin/env bash
# Everything a CUDA machine should run, in one go (about 4-5 minutes on an H200):
#   1. python -m enginetui.kernels.gpu_check: kernel parity, end-to-end greedy parity with transformers,
#      seeded sampling, decode- and prefill-attention speed per launch variant;
#   2. the mixed 64-prompt throughput benchmark against transformers.generate, same weights, in
#      float32 and in bfloat16;
#   3. the per-stage step profile at 1/16/64 running requests, in bfloat16.
# Usage: kernels/gpu_session.sh OUTDIR   (logs and JSON land in OUTDIR; 8 files, the most the
# device tool brings back)
# The engine needs msgspec and pyzmq besides torch, triton and transformers; textual is not needed.
set -uo pipefail
out=${1:?usage: kernels/gpu_session.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
model=(--model facebook/opt-125m --load-format dummy --device cuda)
status=0

{
    date -u
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    $py -c "import torch, triton, transformers; print('torch', torch.__version__, '| triton', triton.__version__, '| transformers', transformers.__version__)"
} 2>&1 | tee "$out/machine.txt"

timeout 270 $py -m enginetui.kernels.gpu_check --json "$out/gpu_check.json" 2>&1 | tee "$out/gpu_check.log" || status=1
timeout 150 $py -m enginetui bench throughput "${model[@]}" --preset mixed --compare hf --hf-batch-sizes 16 32 64 \
    --json "$out/throughput.json" 2>&1 | tee "$out/throughput.log" || status=1
timeout 100 $py -m enginetui bench throughput "${model[@]}" --dtype bfloat16 --preset mixed --compare hf \
    --hf-batch-sizes 64 --json "$out/throughput_bf16.json" 2>&1 | tee "$out/throughput_bf16.log" || status=1
timeout 50 $py -m enginetui bench profile "${model[@]}" --dtype bfloat16 2>&1 | tee "$out/profile_bf16.log" || status=1

# The summaries last, where a truncated log still shows them.
echo
grep -E '^\| |^(PASS|FAIL) in' "$out/gpu_check.log"
tail -n 1 "$out/throughput.log" "$out/throughput_bf16.log" "$out/profile_bf16.log"
echo "gpu_session: exit $status"
exit $status
