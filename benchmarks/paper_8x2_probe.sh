#!/usr/bin/env bash
# Pre-flight for benchmarks/paper_8x2_gpu.sh on a GPU: a few minutes that decide how the long run goes.
#
#     bash benchmarks/paper_8x2_probe.sh DIR
#
# 1. Training MFU of the paper's 8 x 2 (real loop, benchmarks/train_step.py): eager at micro-batch 512
#    (the LT shells' size) and 1024, then torch.compile at 512 (capped at 4 minutes). On the H100 the
#    compiled benchmark ran (27 % MFU against 23 % eager), but a 20-minute compiled run crashed inside
#    the compiled graph in its first minute, so paper_8x2_gpu.sh trains eager unless EXTRA says otherwise.
# 2. Evaluation time: a 3-step checkpoint scored on every 50th cell of `paper-addition`
#    (benchmarks/eval_grid_time.py, with a kernel profile), extrapolated to the whole grid by tokens.
# Writes DIR/mfu.txt and DIR/eval_time.txt.
set -euo pipefail
DIR=${1:?usage: paper_8x2_probe.sh DIR}
HERE=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
mkdir -p "$DIR"
shape=(--preset paper --set model.layers=8 --set model.recurrences=2)

$PY "$HERE/benchmarks/train_step.py" "${shape[@]}" --device cuda --micro-batches 512,1024 --warmup 5 --steps 30 \
    | tee "$DIR/mfu.txt"
timeout 240 $PY "$HERE/benchmarks/train_step.py" "${shape[@]}" --set train.compile=true --device cuda \
    --micro-batches 512 --warmup 15 --steps 30 2> "$DIR/compile.log" | tee -a "$DIR/mfu.txt" \
    || echo "compile: failed or timed out (see $DIR/compile.log)" | tee -a "$DIR/mfu.txt"

rm -rf "$DIR/probe_run"
$PY -m abacus_ray.cli train "${shape[@]}" --set train.max_steps=3 --out "$DIR/probe_run" --device cuda > /dev/null 2>&1
$PY "$HERE/benchmarks/eval_grid_time.py" "$DIR/probe_run" --grid paper-addition --every 50 --profile --device cuda \
    | tee "$DIR/eval_time.txt"
