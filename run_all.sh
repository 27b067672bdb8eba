#!/usr/bin/env bash
# The whole paper (default) or the offline demo (--quick).
#   ./run_all.sh --quick   grids/quick.toml: every method x 5 seeds on 100 scikit-learn digits images (the
#                          over-confident demo regime, docs/quickstart.md), then tables (CPU, minutes);
#                          then the shift and OOD demo: SL1H, 2HML, 4HML x 2 seeds evaluated under
#                          MedMNIST-C's general corruptions and on tiles of scikit-learn's sample
#                          photos (out of distribution), reported with --shift --ood into
#                          $REPORTS/shift-demo from $RESULTS-shift-demo (docs/quickstart.md)
#   ./run_all.sh           grids/paper.toml: 3 datasets x 3 backbones x the paper's 8 trained methods x 5 seeds
#                          under the released code's protocol (docs/fidelity.md; D-Ens and
#                          +TS are derived), then every report
#                          (GPUs; the dataset files must be in place, see the README)
#   ./run_all.sh --precision tf32|bf16   the same at a faster precision (--set precision=,
#                          docs/speed.md "Precision": not the published numbers; default:
#                          released, PyTorch's defaults as the released code ran)
# Extra options after the mode go to every `bench run` (e.g. --jobs 2, --executor slurm
# --partition gpu). Idempotent: finished runs are skipped, so a second call does no
# training, and a crashed or killed call resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
BENCH=.venv/bin/bench
RESULTS=${RESULTS:-results}
REPORTS=${REPORTS:-reports}

MODE=full
if [ "${1:-}" = "--quick" ]; then
    MODE=quick
    shift
fi
# --precision P: the precision switch for every run (a later --set precision= wins)
PRECISION=()
if [ "${1:-}" = "--precision" ]; then
    PRECISION=(--set "precision=${2:?--precision needs released, tf32 or bf16}")
    shift 2
fi

report() {
    "$BENCH" report --results "$RESULTS" --out "$REPORTS" || status=$?
}

# The shift and OOD demo (docs/quickstart.md, "Shift and OOD"): its own records
# (5 test images a class: another data identity, so other config hashes) in a
# folder beside $RESULTS, its own report in $REPORTS/shift-demo. The corrupted
# test split (66 blocks x 50 images) is built first with every core; the runs
# then find it cached. The OOD set is written by `bench data ood-demo`.
SHIFT_DATA=(--dataset digits --data-opt train_per_class=10 --data-opt test_per_class=5)
shift_demo() {
    local results="${RESULTS%/}-shift-demo" t0 t1
    local ood="$results/sklearn-photos"
    t0=$(date +%s)
    "$BENCH" data ood-demo --out "$ood" || { status=$?; return; }
    "$BENCH" data shift "${SHIFT_DATA[@]}" --jobs "$JOBS" || { status=$?; return; }
    "$BENCH" run --method sl1h,2hml,4hml "${SHIFT_DATA[@]}" --seeds 2 --profile demo \
        --eval shift --eval "ood:$ood" --jobs "$JOBS" --results "$results" "$@" || status=$?
    "$BENCH" report --results "$results" --out "${REPORTS%/}/shift-demo" --shift --ood \
        || status=$?
    t1=$(date +%s)
    echo "shift and OOD demo: $((t1 - t0)) s (report: ${REPORTS%/}/shift-demo)"
}

status=0
if [ "$MODE" = quick ]; then
    # Small CPU runs: several side by side (one torch thread each) beat one run
    # with every core. JOBS=1 ./run_all.sh --quick runs them one at a time.
    JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}
    # the demo's grid: grids/quick.toml (every method x 5 seeds, 100 digits images)
    "$BENCH" run --grid grids/quick.toml ${PRECISION[@]+"${PRECISION[@]}"} \
        --jobs "$JOBS" --results "$RESULTS" "$@" || status=$?
    report
    shift_demo "$@"
    exit "$status"
fi

# The fastest strategy the GPU measurements support (docs/speed.md, "Measured
# on an H200"): every run's whole training step captured as one CUDA graph
# (graph=auto), and runs fused by method trained as separate models whose
# steps interleave on one CUDA stream each (fuse_as=auto; 8 PathMNIST runs at
# 28 px: 1.29 ms per run-step against 3.26 alone and 1.80 as one vmapped
# model of 8). As many runs a group as the GPU's free memory holds by the
# sweep's per-run estimate (docs/sweeps.md, "Fused groups"): on an H200 the
# 28 px groups whole, 224 px ones 17-20 runs. A --fuse or --fuse-max of yours, or --set
# graph=false, wins: they come later on the command line.
FUSE=()
if .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        2>/dev/null; then
    echo "run_all.sh: GPU: each training step captured as one CUDA graph (graph=auto);" \
         "runs fused by method on CUDA streams (--fuse methods, fuse_as=auto)," \
         "as many a group as free GPU memory holds (--fuse-max N to choose)"
    FUSE=(--fuse methods)
else
    echo "run_all.sh: no GPU: the per-step path, one run per worker (--jobs)"
fi
# The released code's protocol (docs/fidelity.md): torchvision backbones with
# ImageNet weights for every dataset, PathMNIST included (the released model
# code always loads them). Check it first with --dry-run. A failed run does not
# stop the other datasets; the exit status says something failed.
# The grid itself is grids/paper.toml (methods, backbones, seeds, profile,
# weights), one named grid per dataset.
for DATASET in chaoyang kvasir pathmnist; do
    "$BENCH" run --grid "grids/paper.toml:$DATASET" --results "$RESULTS" \
        ${FUSE[@]+"${FUSE[@]}"} ${PRECISION[@]+"${PRECISION[@]}"} "$@" \
        || status=$?
done
report
exit "$status"
