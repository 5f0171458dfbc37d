#!/usr/bin/env bash
# What a CUDA machine should run, in ONE device call of under 10 minutes (kernels/GPU_NOTES.md):
#
#   kernels/gpu_session.sh OUTDIR [--dry-run] [PART ...]
#
# Parts, most important first; the default runs these five in this order, each under its own time
# limit, all inside one budget (GPU_SESSION_BUDGET_S, default 540 s: a part gets the smaller of its
# limit and what is left; one that would get under 20 s is skipped):
#   graphs     the CUDA-only test of captured graphs (tests/worker/test_cuda_graphs.py, skipped on CPU), then
#              tools/graph_check.py on opt-125m fp32 and bf16: decode CUDA graphs captured (time, sizes),
#              greedy tokens with graphs = without (--enforce-eager's path) = transformers.generate,
#              decode step time at 1/16/64 running, graphs and eager               -> graphs.json
#   prefill    tools/gpu_check.py --steps prefill: prompt attention per launch variant, query tiles of
#              16 vs 64 / 128 rows, on 8 x 2,048-token prompts (GQA 32/8, h128) and opt-125m's shape,
#              beside torch's scaled_dot_product_attention on the same shapes   -> prefill.json
#   llama      graph_check on the Llama-3.1-8B config (random weights, bf16): graphs, greedy parity
#              with transformers on 3 prompts, decode step at 1/16/64 vs the HBM floor -> llama-3.1-8b.json
#   qwen3      the same on the Qwen3-8B config                                     -> qwen3-8b.json
#   dashboard  `enginetui --device cuda` in a pseudo-terminal, bursts of requests, its screen saved
#              (tools/pty_dashboard.py)          -> dashboard.svg, the engine's output in dashboard_engine.log
# Named only (a second call, if device time is left):
#   throughput8b  the mixed throughput benchmark on the Llama-3.1-8B shape, bf16, graphs on -> throughput_8b.json
#   kernels       the 2026-12-04 run: gpu_check in full, mixed throughput against transformers in fp32
#                 and bf16, the step profile (about 4-5 minutes)                  -> gpu_check.json
#
# Every part's output goes to OUTDIR/session.log (and the terminal), the machine to machine.txt: with
# the default parts 8 files, what the device tool brings back at most. A summary ends the output.
# --dry-run runs every part's CPU form here (tiny models, graphs replayed by EagerReplay, Triton
# interpreted, the dashboard on CPU), so no syntax or import error reaches a GPU.
#
# The engine needs msgspec and pyzmq, the dashboard textual, mdit-py-plugins and platformdirs, which
# that machine lacks: wheels for its Python in .whl/ (carried) are installed first. To make them:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl msgspec==0.23.0 pyzmq==27.3.0 textual==8.2.8 mdit-py-plugins==0.7.0 platformdirs==4.14.9
set -uo pipefail
usage="usage: kernels/gpu_session.sh OUTDIR [--dry-run] [graphs|prefill|llama|qwen3|dashboard|throughput8b|kernels ...]"
out=${1:?$usage}
shift
dry=0
parts=()
for arg in "$@"; do
    case $arg in
    --dry-run) dry=1 ;;
    graphs | prefill | llama | qwen3 | dashboard | throughput8b | kernels) parts+=("$arg") ;;
    *)
        echo "unknown part $arg: $usage" >&2
        exit 2
        ;;
    esac
done
((${#parts[@]})) || parts=(graphs prefill llama qwen3 dashboard)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/session.log
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
if ((!dry)) && compgen -G ".whl/*.whl" >/dev/null; then
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" # tools/*.py import enginetui from this checkout
budget=${GPU_SESSION_BUDGET_S:-540}
status=0
summary=()

{
    date -u
    echo "parts: ${parts[*]}$( ((dry)) && echo ' (dry run, CPU)')"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    $py -c "import torch, triton, transformers; print('torch', torch.__version__, '| triton', triton.__version__, '| transformers', transformers.__version__)"
    $py -c "import msgspec, zmq, textual; print('msgspec', msgspec.__version__, '| pyzmq', zmq.__version__, '| textual', textual.__version__)"
} 2>&1 | tee "$out/machine.txt" | tee -a "$log"

# step NAME LIMIT_S CMD...: CMD under the smaller of LIMIT_S and the budget left, its output into session.log.
step() {
    local name=$1 limit=$2 left start rc
    shift 2
    left=$((budget - SECONDS))
    if ((left < 20)); then
        summary+=("$name: skipped, ${left} s of the ${budget} s budget left")
        status=1
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name: limit $limit s, $(date -u +%T): $*" | tee -a "$log"
    start=$SECONDS
    timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    summary+=("$name: exit $rc in $((SECONDS - start)) s$( ((rc == 124)) && echo ' (time limit)')")
    ((rc == 0)) || status=1
}

cpu=()
((dry)) && cpu=(--cpu-smoke)
shapes=$(mktemp -d)
trap 'rm -rf "$shapes"' EXIT
for part in "${parts[@]}"; do
    case $part in
    graphs)
        step cuda_test 60 $py -m pytest -q -rs -p no:cacheprovider tests/worker/test_cuda_graphs.py -k captured_cuda_graphs
        step graphs 150 $py tools/graph_check.py "${cpu[@]}" --models opt-125m-fp32 opt-125m-bf16 --json "$out/graphs.json"
        ;;
    prefill) step prefill 90 $py tools/gpu_check.py "${cpu[@]}" --steps prefill --json "$out/prefill.json" ;;
    llama) step llama 130 $py tools/graph_check.py "${cpu[@]}" --models llama-3.1-8b --json "$out/llama-3.1-8b.json" ;;
    qwen3) step qwen3 120 $py tools/graph_check.py "${cpu[@]}" --models qwen3-8b --json "$out/qwen3-8b.json" ;;
    dashboard)
        if ((dry)); then
            step dashboard 60 $py tools/pty_dashboard.py "$out/dashboard.svg" --after 12 -- --device cpu \
                --num-gpu-blocks-override 48 --seed 0 --log-file "$out/dashboard_engine.log"
        else
            step dashboard 90 $py tools/pty_dashboard.py "$out/dashboard.svg" --after 40 -- --device cuda \
                --burst-size 32 --num-gpu-blocks-override 96 --seed 0 --log-file "$out/dashboard_engine.log"
        fi
        ;;
    throughput8b)
        if ((dry)); then
            small=$($py -c "import sys; sys.path.insert(0, 'tools'); from graph_check import small_shape_dir; print(small_shape_dir('llama-3.1-8b', '$shapes'))")
            step throughput8b 120 $py -m enginetui bench throughput --model "$small" --load-format dummy --device cpu \
                --dtype float32 --disable-detokenize --preset quick --json "$out/throughput_8b.json"
        else
            llama=$($py -c "from enginetui.core.models.known_configs import shape_dir; print(shape_dir('llama-3.1-8b', '$shapes'))")
            step throughput8b 200 $py -m enginetui bench throughput --model "$llama" --load-format dummy --device cuda \
                --dtype bfloat16 --max-model-len 4096 --disable-detokenize --preset mixed --json "$out/throughput_8b.json"
        fi
        ;;
    kernels)
        step gpu_check 270 $py tools/gpu_check.py "${cpu[@]}" --json "$out/gpu_check.json"
        if ((!dry)); then
            model=(--model facebook/opt-125m --load-format dummy --device cuda)
            step throughput 150 $py -m enginetui bench throughput "${model[@]}" --preset mixed --compare hf \
                --hf-batch-sizes 16 32 64
            step throughput_bf16 100 $py -m enginetui bench throughput "${model[@]}" --dtype bfloat16 --preset mixed \
                --compare hf --hf-batch-sizes 64
            step profile_bf16 50 $py -m enginetui bench profile "${model[@]}" --dtype bfloat16
        fi
        ;;
    esac
done

# The summary last, where the device tool's tail of the output shows it.
{
    echo
    echo "== summary ($(date -u +%T), ${SECONDS} s)"
    grep -E '^\| |^(PASS|FAIL) in|^engine running|\.svg: |^(FAILED|SKIPPED) |^[0-9]+ (passed|failed)' "$log"
    printf '%s\n' "${summary[@]}"
    echo "gpu_session ${parts[*]}: exit $status"
} | tee -a "$log"
exit $status
