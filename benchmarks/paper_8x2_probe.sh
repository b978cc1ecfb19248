#!/usr/bin/env bash
# Pre-flight for benchmarks/paper_8x2_gpu.sh on a GPU: a few minutes that decide how the long run goes.
#
#     bash benchmarks/paper_8x2_probe.sh DIR
#
# 1. Training MFU of the paper's 8 x 2 (real loop, benchmarks/train_step.py): eager at micro-batch 512
#    (the LT shells' size) and 1024, then torch.compile at 512 (capped at 4 minutes).
# 2. Evaluation time: a 3-step checkpoint scored on 100 cells spread over the 100 x 100 grid
#    (i, j in 1, 12, ..., 100), extrapolated to the 10,060 cells of `paper-addition`.
# Writes DIR/mfu.txt, DIR/probe_eval.txt and DIR/compile (true/false: whether compile was >= 15 % faster).
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
    --micro-batches 512 --warmup 15 --steps 30 2> "$DIR/compile.log" | tee -a "$DIR/mfu.txt" || echo "compile: failed or timed out" | tee -a "$DIR/mfu.txt"

# rows are "micro samples/s tokens/s ms/step MFU": the first 512 row is eager, a second one compiled
awk '$1 == 512 {n++; if (n == 1) e = $2; else c = $2} END {print (c > 1.15 * e) ? "true" : "false"}' \
    "$DIR/mfu.txt" > "$DIR/compile"

rm -rf "$DIR/probe_run" "$DIR/probe_results"
$PY -m abacus_ray.cli train "${shape[@]}" --set train.max_steps=3 --out "$DIR/probe_run" --device cuda > /dev/null 2>&1
start=$(date +%s.%N)
$PY -m abacus_ray.cli eval "$DIR/probe_run" --out "$DIR/probe_results" --cells 1-100:11x1-100:11 --per-cell 100 \
    --device cuda --quiet
end=$(date +%s.%N)
$PY -c "s = $end - $start; print(f'100 cells in {s:.1f} s (process included); paper-addition ~{s * 100.6 / 60:.1f} min')" \
    | tee "$DIR/probe_eval.txt"
