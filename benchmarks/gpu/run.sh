#!/usr/bin/env bash
# The GPU machine's one command (issue 18): Ray from .gpu/site.tgz, then one stage of measurements.
#
#     python benchmarks/gpu/bundle.py                      # here, once: builds .gpu/site.tgz (~43 MiB)
#     run(carry=[".gpu"], command="bash benchmarks/gpu/run.sh STAGE")   # there; writes into $OUT
#
# Stages (each fits the 10-minute limit of one command; `all` runs them in order, for a longer lease):
#   check    imports, an embedded Ray that sees the GPU, versions               -> $OUT/check.txt
#   raypath  one paper-preset trial of sweeps/fig10_k.py through Tune + TorchTrainer(use_gpu, NCCL),
#            then Ray Data grid evaluation on the GPU actor pool, Parquet         -> $OUT/raypath/
#   mfu      training MFU of the 8 x 2: eager and compiled (benchmarks/train_step.py), then a
#            5-minute compiled run of the real loop                              -> $OUT/mfu/
#   grid     an 8 x 2 trained for TRAIN_MIN minutes, the whole paper-addition grid through the real
#            CLI (timed, load included), and verdict flips fp32 vs bf16 / bf16-pure / tf32 -> $OUT/grid/
#   share    4 tiny trials on one GPU (cluster.gpus_per_worker=0.25) against 1 alone -> $OUT/share/
#   x10      issue 20 at paper scale: the 8 x 2 on size-20 addition with k <= 200 drawn `balanced`,
#            trained X10_MIN minutes in all (rerun the stage with a larger X10_MIN to train on: it resumes), then scored on the GPU
#            on the diagonal to 220 digits and a sparse grid past 100 (Wilson intervals in the
#            summary); a checkpoint cannot come back, so scoring happens in the same command -> $OUT/x10/
# Knobs: TRAIN_MIN (grid, default 4), MFU_MIN (mfu, default 5), X10_MIN (x10, default 6), X10_DRAW (balanced). Sweeps run with --tracking none and
# --no-dashboard: the bundle carries neither MLflow nor plotly; Parquet and logs come back.
set -uo pipefail
STAGE=${1:?usage: run.sh check|raypath|mfu|grid|share|x10|all}
OUT=${OUT:?run on the device machine: \$OUT is where results come back}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
SITE=/tmp/abacus-site
if [ ! -d "$SITE/ray" ]; then
    mkdir -p "$SITE" && tar -xzf "$HERE/.gpu/site.tgz" -C "$SITE" --strip-components=1 \
        || { echo "no $HERE/.gpu/site.tgz: build it with benchmarks/gpu/bundle.py and carry .gpu" >&2; exit 2; }
fi
export PYTHONPATH="$SITE:$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token
cd "$HERE"
paper_8x2=(--preset paper --set model.layers=8 --set model.recurrences=2)

check() {
    mkdir -p "$OUT" && {
        nvidia-smi -L
        $PY -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
        $PY -c "import ray, ray.tune, ray.train, ray.train.torch, ray.data; print('ray', ray.__version__, ray.__file__)"
        $PY -c "
from abacus_ray.cluster import runtime
import ray
runtime.init(num_gpus=1)
print('ray resources', ray.cluster_resources())
print('gpu ids in a task', ray.get(ray.remote(num_gpus=1)(lambda: ray.get_gpu_ids()).remote()))
ray.shutdown()"
    } 2>&1 | tee "$OUT/check.txt"
}

raypath() {
    local d="$OUT/raypath"; mkdir -p "$d"
    # one k, a budget of 0.1 A4000-hours (~290 k samples, under a minute on an H100), the diagonal to 160
    /usr/bin/time -v $PY sweeps/fig10_k.py --preset paper --max-trials 1 --storage /tmp/raypath \
        --set cluster.use_gpu=true --set cluster.trainer=torch --set train.budget_a4000_hours=0.1 \
        --grid diagonal:1-160 --grid cells:1-30x1-30 --no-dashboard --tracking none > "$d/sweep.log" 2>&1
    echo "rc $?" >> "$d/sweep.log"
    cp -r /tmp/raypath/fig10_k/results "$d/" 2>/dev/null
    $PY -m abacus_ray.cli summary /tmp/raypath/fig10_k/results > "$d/summary.txt" 2>&1
}

mfu() {
    local d="$OUT/mfu"; mkdir -p "$d"
    $PY benchmarks/train_step.py "${paper_8x2[@]}" --device cuda --micro-batches 512,1024 --warmup 5 --steps 30 \
        > "$d/eager.txt" 2>&1
    $PY benchmarks/train_step.py "${paper_8x2[@]}" --set train.compile=true --device cuda --micro-batches 512,1024 \
        --warmup 15 --steps 30 > "$d/compiled.txt" 2>&1
    hours=$($PY -c "print(${MFU_MIN:-5} / 60)")
    $PY -m abacus_ray.cli train "${paper_8x2[@]}" --set train.compile=true --set "train.budget_hours=$hours" \
        --set train.report_every_s=30 --out /tmp/mfu_run --device cuda > "$d/run.out" 2> "$d/run.log"
    echo "rc $?" >> "$d/run.log"
}

grid() {
    local d="$OUT/grid"; mkdir -p "$d"
    hours=$($PY -c "print(${TRAIN_MIN:-4} / 60)")
    $PY -m abacus_ray.cli train "${paper_8x2[@]}" --set "train.budget_hours=$hours" --set train.report_every_s=30 \
        --out /tmp/grid_run --device cuda > "$d/train.out" 2> "$d/train.log"
    start=$(date +%s.%N)
    $PY -m abacus_ray.cli eval /tmp/grid_run --out "$d/results" --grid paper-addition --device cuda --quiet \
        > "$d/eval.out" 2> "$d/eval.log"
    echo "eval_wall_s $($PY -c "print($(date +%s.%N) - $start)") (fp32, model load included)" >> "$d/timings.txt"
    for p in bf16 bf16-pure; do
        start=$(date +%s.%N)
        $PY -m abacus_ray.cli eval /tmp/grid_run --out "/tmp/grid_$p" --grid paper-addition --device cuda --quiet \
            --precision "$p" > /dev/null 2>> "$d/eval.log"
        echo "eval_wall_s $($PY -c "print($(date +%s.%N) - $start)") ($p, model load included)" >> "$d/timings.txt"
    done
    $PY benchmarks/precision_verdicts.py /tmp/grid_run --grid paper-addition --device cuda \
        --precisions fp32 bf16 bf16-pure tf32 --csv "$d/precision.csv" > "$d/precision.txt" 2>&1
    $PY -m abacus_ray.cli summary "$d/results" > "$d/summary.txt" 2>&1
}

share() {
    local d="$OUT/share"; mkdir -p "$d"
    for n in 1 4; do
        $PY sweeps/fig10_k.py --preset tiny --seeds 1 --max-trials "$n" --storage "/tmp/share$n" --no-eval \
            --no-dashboard --tracking none --set cluster.use_gpu=true --set cluster.gpus_per_worker=0.25 \
            --set train.max_steps=3000 --set train.budget_hours=1000 > "$d/trials$n.log" 2>&1
        echo "rc $?" >> "$d/trials$n.log"
        # each trial's final report: its whole-session samples/s; summed over the trials sharing the GPU
        $PY -c "
import json, pathlib, sys
finals = [json.loads(p.read_text().splitlines()[-1]) for p in pathlib.Path('/tmp/share$n').glob('**/tune/*/result.json')]
rates = [f['samples_per_s'] for f in finals if f.get('final')]
print(f'$n trial(s) sharing one GPU: {len(rates)} finished, samples/s each', [round(r) for r in rates], 'sum', round(sum(rates)))
" | tee -a "$d/summary.txt"
    done
}

x10() {
    local d="$OUT/x10"; mkdir -p "$d"
    hours=$($PY -c "print(${X10_MIN:-6} / 60)")
    resume=(); [ -d /tmp/x10_run ] && resume=(--resume)  # the budget is the run's total: raise X10_MIN to go on
    $PY -m abacus_ray.cli train "${paper_8x2[@]}" --set model.max_k=200 --set "model.k_draw=${X10_DRAW:-balanced}" \
        --set train.budget_a4000_hours=null --set "train.budget_hours=$hours" --set train.report_every_s=30 \
        --set train.checkpoint_every_min=2 "${resume[@]}" --out /tmp/x10_run --device cuda \
        >> "$d/train.out" 2>> "$d/train.log"
    echo "rc $?" >> "$d/train.log"
    $PY -m abacus_ray.cli eval /tmp/x10_run --out "$d/results" --grid diagonal:1-220 \
        --grid cells:101-221:30x101-221:30 --per-cell 100 --device cuda --quiet > "$d/eval.out" 2> "$d/eval.log"
    $PY -m abacus_ray.cli summary "$d/results" --diagonal > "$d/summary.txt" 2>&1
    $PY -c "
from abacus_ray.evaluation.aggregate import with_intervals
from abacus_ray.evaluation.results import read_cells
c = with_intervals(read_cells('$d/results')).sort_values(['i', 'j'])
for r in c.itertuples():  # every cell: accuracy and its Wilson 95 % interval
    print(f'{r.i:>4} {r.j:>4} {100 * r.accuracy:6.1f} [{100 * r.acc_lo:5.1f}, {100 * r.acc_hi:5.1f}] n={r.n}')
" > "$d/cells.txt" 2>&1
}

case "$STAGE" in
    check|raypath|mfu|grid|share|x10) "$STAGE" ;;
    all) check; raypath; mfu; grid; share ;;
    *) echo "unknown stage $STAGE" >&2; exit 2 ;;
esac
