#!/usr/bin/env bash
# The GPU machine's command: Ray from .gpu/site.tgz, then one or more stages of measurements.
#
#     python benchmarks/gpu/bundle.py                      # here, once: builds .gpu/site.tgz (~43 MiB)
#     run(carry=[".gpu"], command="DEADLINE_S=540 bash benchmarks/gpu/run.sh check raypath mfu")
#     run(carry=[".gpu"], command="DEADLINE_S=240 bash benchmarks/gpu/run.sh grid")   # same warm machine
#
# Stages, in the order of docs/performance.md "The GPU path" (each writes under RES; at the end the whole
# of RES is packed into $OUT/gpu-STAGES.tgz, since at most 8 files come back from a command):
#   check    imports, an embedded Ray (token auth) that sees the GPU, versions          -> check.txt
#   raypath  one trial of sweeps/fig10_k.py (the paper's 8 x 2) trained RAY_MIN minutes (default 5)
#            through Tune + TorchTrainer(use_gpu, NCCL), then grid evaluation on the Ray Data
#            GPU actor pool into Parquet; the trial's reports give the long run's MFU   -> raypath/
#   mfu      30 timed steps of the 8 x 2: eager, compiled (the CUDA default), compiled + bf16-pure;
#            a torch.profiler kernel table of each                                     -> mfu/
#   grid     the raypath trial's model (or RUN; else one trained TRAIN_MIN minutes) on the whole
#            paper-addition grid through the real CLI (timed, load included, in GRID_PRECISIONS,
#            default bf16-pure), and verdict flips of bf16 / bf16-pure / tf32 against fp32 on a
#            spread sample of the grid                                                  -> grid/
#   share    4 tiny trials on one GPU (cluster.gpus_per_worker=0.25) against 1 alone    -> share/
#   x10      the 8 x 2 on size-20 addition with k <= 200 drawn `balanced`, trained X10_MIN minutes
#            (resumes within one lease), scored on the diagonal to 220 digits and a sparse grid past
#            100 with Wilson intervals; a checkpoint cannot come back, so scoring happens here -> x10/
# Knobs: DEADLINE_S (default 560: every stage's timeout is capped so the tarball is written in time),
# RAY_MIN, TRAIN_MIN (4), X10_MIN (6), X10_DRAW (balanced), GRID_PRECISIONS, MFU_BATCH (1024), MFU_STEPS (30). Sweeps run with --tracking
# none and --no-dashboard: the bundle carries neither MLflow nor plotly; Parquet and logs come back.
set -uo pipefail
: "${1:?usage: run.sh STAGE... (check raypath mfu grid share x10 all)}"
OUT=${OUT:?run on the device machine: \$OUT is where results come back}
# At most 8 files come back from a command: the stages write into RES, packed into one tarball at the end.
RES=${RES:-/tmp/gpu_results}; mkdir -p "$RES"
HERE=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
SITE=/tmp/abacus-site
if [ -z "${NO_SITE:-}" ] && [ ! -d "$SITE/ray" ]; then
    mkdir -p "$SITE" && tar -xzf "$HERE/.gpu/site.tgz" -C "$SITE" --strip-components=1 \
        || { echo "no $HERE/.gpu/site.tgz: build it with benchmarks/gpu/bundle.py and carry .gpu" >&2; exit 2; }
fi
[ -n "${NO_SITE:-}" ] && SITE=$HERE  # a rehearsal in this checkout's own environment
export PYTHONPATH="$SITE:$HERE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token
cd "$HERE"
# Rehearsal knobs (a CPU dry run of the script's plumbing before spending device time):
# NO_SITE=1 PYTHON=.venv/bin/python DEV=cpu MODEL_ARGS="--preset tiny" RAY_ARGS="--preset tiny --set cluster.use_gpu=false"
# RAY_MIN=0.5 GRID=cells:1-3x1-3 FLIP_GRID=cells:1-3x1-3 MFU_BATCH=64 MFU_STEPS=10 OUT=/tmp/o bash benchmarks/gpu/run.sh raypath mfu grid
# (on a CPU train.compile's default is eager: add --set train.compile=true to RAY_ARGS to rehearse the compiled trial)
DEV=${DEV:-cuda}
read -r -a paper_8x2 <<< "${MODEL_ARGS:---preset paper --set model.layers=8 --set model.recurrences=2}"
read -r -a ray_args <<< "${RAY_ARGS:---preset paper --set cluster.use_gpu=true}"

# Every stage's timeout is capped by what is left of DEADLINE_S (from this script's start), so the
# tarball is always written before the device command's own limit.
T0=$(date +%s)
cap() { local left=$(( ${DEADLINE_S:-560} - ($(date +%s) - T0) - 15 )); echo $(( $1 < left ? $1 : (left > 1 ? left : 1) )); }

check() {
    mkdir -p "$RES" && {
        nvidia-smi -L
        $PY -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
        $PY -c "import ray, ray.tune, ray.train, ray.train.torch, ray.data; print('ray', ray.__version__, ray.__file__)"
        timeout "$(cap 120)" $PY -c "
from abacus_ray.cluster import runtime
import ray
runtime.init(num_gpus=1)
print('ray resources', ray.cluster_resources())
print('gpu ids in a task', ray.get(ray.remote(num_gpus=1)(lambda: ray.get_gpu_ids()).remote()))
ray.shutdown()"
    } 2>&1 | tee "$RES/check.txt"
}

raypath() {
    local d="$RES/raypath"; mkdir -p "$d"
    # One k of Fig. 10's 8 x 2 trained RAY_MIN minutes (wall, not A4000-hours) through Tune + TorchTrainer
    # on NCCL: this is also the >= 5-minute training run whose MFU the trial reports; then the grid
    # evaluation on the Ray Data GPU pool (the diagonal to 120 and the in-distribution square), Parquet.
    local hours; hours=$($PY -c "print(${RAY_MIN:-5} / 60)")
    local start; start=$(date +%s)
    timeout "$(cap "$($PY -c "print(int(${RAY_MIN:-5} * 60 + 240))")")" $PY sweeps/fig10_k.py "${ray_args[@]}" --max-trials 1 \
        --storage /tmp/raypath --set cluster.trainer=torch --set train.budget_a4000_hours=null \
        --set "train.budget_hours=$hours" --set train.report_every_s=30 \
        --grid diagonal:1-120 --grid cells:1-20x1-20 --no-dashboard --tracking none > "$d/sweep.log" 2>&1
    echo "rc $? wall_s $(( $(date +%s) - start ))" >> "$d/sweep.log"
    tail -n 1 "$d/sweep.log"
    $PY -m abacus_ray.cli summary /tmp/raypath/fig10_k/results > "$d/summary.txt" 2>&1
    $PY -c "
import json, pathlib
for f in sorted(pathlib.Path('/tmp/raypath/fig10_k/tune').glob('*/result.json')):
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    final = [r for r in rows if r.get('final')]
    mfus = [r['mfu'] for r in rows if 'mfu' in r and not r.get('final')]
    print(f.parent.name, 'reports', len(rows), 'mfu per report', [round(100 * m, 1) for m in mfus])
    for r in final:
        print('final', {k: r[k] for k in ('step', 'samples', 'elapsed_s', 'samples_per_s', 'mfu', 'loss') if k in r})
" > "$d/mfu_run.txt" 2>&1
    cat "$d/mfu_run.txt"
    (cd /tmp/raypath/fig10_k && tar -czf "$d/results.tgz" results cluster.parquet sweep.json 2>/dev/null)
}

mfu() {
    local d="$RES/mfu"; mkdir -p "$d"
    # 30 timed steps of the 8 x 2 (micro-batch MFU_BATCH, default 1024) in bf16 autocast: eager (the
    # block uncompiled, one-buffer GLU/QKV backward), compiled (the CUDA default since train.compile=null),
    # and compiled with train.precision=bf16-pure (bf16 working model, fp32 master weights); each with
    # the torch.profiler kernel table of where its step's time goes. The first compiled run pays the
    # compilation; the profiled rerun in the same process reuses the graphs.
    local common=("${paper_8x2[@]}" --device "$DEV" --micro-batches "${MFU_BATCH:-1024}" --steps "${MFU_STEPS:-30}")
    timeout "$(cap 150)" $PY benchmarks/train_step.py "${common[@]}" --set train.compile=false --warmup 5 \
        --profile "$d/profile_eager.txt" > "$d/eager.txt" 2>&1
    timeout "$(cap 200)" $PY benchmarks/train_step.py "${common[@]}" --set train.compile=true --warmup 10 \
        --profile "$d/profile_compiled.txt" > "$d/compiled.txt" 2>&1
    timeout "$(cap 200)" $PY benchmarks/train_step.py "${common[@]}" --set train.compile=true \
        --set train.precision=bf16-pure --warmup 10 --profile "$d/profile_compiled_bf16_pure.txt" \
        > "$d/compiled_bf16_pure.txt" 2>&1
    grep -h -A1 "micro_batch" "$d/eager.txt" "$d/compiled.txt" "$d/compiled_bf16_pure.txt"
    for f in profile_eager profile_compiled profile_compiled_bf16_pure; do  # the heaviest kernels of each
        echo "-- $f"; head -n 18 "$d/$f.txt" 2>/dev/null | cut -c1-160
    done
}

grid() {
    local d="$RES/grid"; mkdir -p "$d"
    # the raypath trial's model when this lease trained it (or RUN); else one trained TRAIN_MIN minutes here
    local run; run=${RUN:-$(ls -d /tmp/raypath/fig10_k/train/*/ 2>/dev/null | head -n 1)}
    if [ -z "$run" ]; then
        run=/tmp/grid_run
        hours=$($PY -c "print(${TRAIN_MIN:-4} / 60)")
        $PY -m abacus_ray.cli train "${paper_8x2[@]}" --set "train.budget_hours=$hours" --set train.report_every_s=30 \
            --out "$run" --device "$DEV" > "$d/train.out" 2> "$d/train.log"
    fi
    echo "model: $run" >> "$d/timings.txt"
    # the whole grid (10,060 cells x 100 problems) through the CLI, load included, in the fastest precision
    for p in ${GRID_PRECISIONS-bf16-pure}; do
        start=$(date +%s.%N)
        timeout "$(cap 300)" $PY -m abacus_ray.cli eval "$run" --out "$d/results_$p" --grid "${GRID:-paper-addition}" \
            --device "$DEV" --quiet --precision "$p" > "$d/eval_$p.out" 2> "$d/eval_$p.log"
        echo "rc $? eval_wall_s $($PY -c "print(round($(date +%s.%N) - $start, 1))") ($p, grid ${GRID:-paper-addition}, model load included)" >> "$d/timings.txt"
    done
    # verdict flips against fp32 on a spread sample of the grid (every 9th length: 144 cells x 100 problems)
    timeout "$(cap 150)" $PY benchmarks/precision_verdicts.py "$run" --grid "${FLIP_GRID:-cells:1-100:9x1-100:9}" --device "$DEV" \
        --precisions fp32 bf16 bf16-pure tf32 --csv "$d/precision.csv" > "$d/precision.txt" 2>&1
    for p in ${GRID_PRECISIONS-bf16-pure}; do
        $PY -m abacus_ray.cli summary "$d/results_$p" > "$d/summary_$p.txt" 2>&1
        (cd "$d" && tar -czf "results_$p.tgz" "results_$p" && rm -rf "results_$p")
    done
}

share() {
    local d="$RES/share"; mkdir -p "$d"
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
    local d="$RES/x10"; mkdir -p "$d"
    hours=$($PY -c "print(${X10_MIN:-6} / 60)")
    resume=(); [ -d /tmp/x10_run ] && resume=(--resume)  # the budget is the run's total: raise X10_MIN to go on
    $PY -m abacus_ray.cli train "${paper_8x2[@]}" --set model.max_k=200 --set "model.k_draw=${X10_DRAW:-balanced}" \
        --set train.budget_a4000_hours=null --set "train.budget_hours=$hours" --set train.report_every_s=30 \
        --set train.checkpoint_every_min=2 "${resume[@]}" --out /tmp/x10_run --device "$DEV" \
        >> "$d/train.out" 2>> "$d/train.log"
    echo "rc $?" >> "$d/train.log"
    $PY -m abacus_ray.cli eval /tmp/x10_run --out "$d/results" --grid diagonal:1-220 \
        --grid cells:101-221:30x101-221:30 --per-cell 100 --device "$DEV" --quiet > "$d/eval.out" 2> "$d/eval.log"
    $PY -m abacus_ray.cli summary "$d/results" --diagonal > "$d/summary.txt" 2>&1
    $PY -c "
from abacus_ray.evaluation.aggregate import with_intervals
from abacus_ray.evaluation.results import read_cells
from abacus_ray.storage import resolve
c = with_intervals(read_cells(resolve('$d/results'))).sort_values(['i', 'j'])
for r in c.itertuples():  # every cell: accuracy and its Wilson 95 % interval
    print(f'{r.i:>4} {r.j:>4} {100 * r.accuracy:6.1f} [{100 * r.acc_lo:5.1f}, {100 * r.acc_hi:5.1f}] n={r.n}')
" > "$d/cells.txt" 2>&1
}

for stage in "$@"; do
    case "$stage" in
        check|raypath|mfu|grid|share|x10) echo "== $stage $(date -u +%T)"; "$stage" ;;
        all) check; raypath; mfu; grid; share ;;
        *) echo "unknown stage $stage" >&2; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
tag=$(IFS=-; echo "$*")
tar -czf "$OUT/gpu-$tag.tgz" -C "$RES" . && ls -la "$OUT"
# the headline lines, in the reply itself
tail -n 3 "$RES"/check.txt "$RES"/raypath/summary.txt "$RES"/mfu/*.txt "$RES"/grid/timings.txt \
    "$RES"/grid/precision.txt 2>/dev/null | grep -v "^$" | cut -c1-200
