#!/usr/bin/env bash
# The paper's 8 x 2 looped transformer (Fig. 4) on size-20 addition, on one GPU, for MINUTES of
# wall clock (the paper's time budget, scaled), then the whole `paper-addition` grid (1-100 x 1-100
# and the 101-160 diagonal, 100 problems per cell) by exact match. Issue 9, item 6.
#
#     bash benchmarks/paper_8x2_gpu.sh DIR [MINUTES]        # default 20 minutes
#
# Needs only torch + pyarrow (no Ray, no install): it runs the CLI from this checkout. Writes into DIR:
#   train.log (one progress line per report, MFU included), run/ (checkpoints), results/ (Parquet),
#   eval.log, summary.txt, timings.txt and `done` (or `failed`) when it stops.
# Environment knobs: STAGE (all, train or eval: one half only, e.g. to evaluate with newer code),
# and for a CPU rehearsal DEVICE (default cuda), GRID (default paper-addition), PER_CELL (default 100),
# EXTRA (more --set overrides, space-separated).
set -uo pipefail
DIR=${1:?usage: paper_8x2_gpu.sh DIR [MINUTES]}
MINUTES=${2:-20}
DEVICE=${DEVICE:-cuda}
GRID=${GRID:-paper-addition}
PER_CELL=${PER_CELL:-100}
STAGE=${STAGE:-all}
HERE=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
mkdir -p "$DIR"
rm -f "$DIR/done" "$DIR/failed" "$DIR/trained"
trap 'touch "$DIR/failed"' ERR
set -e

hours=$($PY -c "print($MINUTES / 60)")
# The preset is Table 5's (hidden 1024, 16 heads, k = 100, lr 1e-4, batch 8192 ramped over 60 % of
# the budget, micro-batch 512 as the LT shells); only the shape and the budget change.
overrides=(model.layers=8 model.recurrences=2 "train.budget_hours=$hours" train.report_every_s=30)
# shellcheck disable=SC2206
overrides+=(${EXTRA:-})
sets=()
for o in "${overrides[@]}"; do sets+=(--set "$o"); done

if [ "$STAGE" != eval ]; then
    start=$(date +%s)
    $PY -m abacus_ray.cli train --preset paper "${sets[@]}" --out "$DIR/run" --device "$DEVICE" \
        > "$DIR/train.out" 2> "$DIR/train.log"
    echo "train_wall_s $(($(date +%s) - start))" >> "$DIR/timings.txt"
    touch "$DIR/trained"
    [ "$STAGE" = train ] && { touch "$DIR/done"; exit 0; }
fi
trained=$(date +%s)
$PY -m abacus_ray.cli eval "$DIR/run" --out "$DIR/results" --grid "$GRID" --per-cell "$PER_CELL" \
    --device "$DEVICE" --run-id paper-8x2-gpu --quiet > "$DIR/eval.out" 2> "$DIR/eval.log"
evaluated=$(date +%s)
$PY -m abacus_ray.cli summary "$DIR/results" --label name --label model.layers --label model.recurrences \
    > "$DIR/summary.txt"
{
    echo "eval_wall_s $((evaluated - trained))"
    echo "device $($PY -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")')"
    echo "torch $($PY -c 'import torch; print(torch.__version__)')"
} >> "$DIR/timings.txt"
touch "$DIR/done"
