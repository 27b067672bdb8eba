#!/usr/bin/env bash
# The GPU measurements of docs/speed.md as ONE command, for a session with ~15 minutes of
# device time (machine start included). Run from the repository root:
#
#     bash benchmarks/gpu_check.sh            # writes to $OUT, else ./gpu_out
#
# Steps, each a shell function; STEPS names which run and in what order
# (default: capture streamtime graphtime gpuplan e2e):
#   staging    python -m bench.speed.staging: one PathMNIST epoch's staging (11,250 steps),
#              maskaug.derive per step (old) vs per epoch (new), bit-equal, and their ratio;
#              then streamtime's 8 mixup members at 28 px over 3 epochs, stage_ahead off/on.
#   capture    python -m bench.speed.capture --device cuda --no-explain: per case (every
#              method alone, fused groups) host copies / host ops / reads per step (0),
#              and the captured replay == graph-safe eager == the per-step path, bit for
#              bit, on the card (smallcnn, then ResNet50 for three cases).
#   streamtime python -m bench.speed.streamtime: ms per run-step of a fused group trained by
#              the real loop as K runs on K streams vs one vmapped model (ResNet50; 28 px
#              with 1, 2, 4, 8 members, 224 px with 1, 2, 4): what fuse_as=auto picks.
#   graphtime  python -m bench.speed.graphtime: ms/step of the per-step path, the
#              graph-safe step and its CUDA graph (ResNet50; 28 px with 1, 5, 25 members,
#              224 px with 1 and 5), 2 and 4 streams, kernels per step, grid hours.
#   syncs      python -m bench.speed.syncs: host-device synchronisations per training
#              step of every method, single and fused (expected 0; docs/speed.md).
#   gpuplan    python -m bench.speed.gpuplan: the harness's step on synthetic data of the
#              paper's shapes, headline first, projected to run / group / grid wall
#              time (GPLAN_ARGS narrows it: --datasets, --strategies, --variants ...).
#   e2e        bench run end to end (the real CLI, worker processes, records): 5 methods
#              x 1 seed on digits, fused by method and unfused, compared run by run,
#              then bench report over the fused records.
#   det        the cost of `--set deterministic=true`: gpuplan's step of Kvasir-sized
#              (224 px) ResNet50 4HML alone, switch off and on.
#   sidebyside python -m bench.speed.sidebyside: 1, 2, 3 processes training the headline
#              fused group at once (`bench run --jobs-per-gpu K`): images/s of all.
#   perf       python -m bench.speed.perf at 28 px, ResNet50, 4 heads: harness vs
#              reference (DataLoader + PIL) vs bare loop; fp32, then bf16 + channels_last.
#   precision  streamtime at 224 px, 4 streams: ResNet50 at precision released / tf32 /
#              bf16, Swin-T released / tf32 (~2 GPU-minutes; docs/speed.md "Precision").
#   streams    streamtime at 28 px with 16 and 32 streams (ResNet50).
#   slice      benchmarks/e2e_slice.py: bench run on a PathMNIST-shaped synthetic set,
#              one epoch, 8 methods x 1 seed a backbone, fused as ./run_all.sh does;
#              wall time / bench.speed.cells' projection (target within 15%).
#   compiled   compile_step (docs/speed.md, "The compiled step"): graphtime at 28 px,
#              ResNet50, x25 (the paper's one-head group), x8 and x1, captured eager vs
#              captured compiled: kernels per step and ms per run-step, and their
#              ratios (compiled / eager); then the capture proof's compiled cases
#              (smallcnn: 0 copies / host ops / reads, replay bit for bit).
#
# Issue 47's check, ONE call of at most 7 GPU-minutes (420 s):
#     STEPS=issue47 bash benchmarks/gpu_check.sh
# runs staging compiled precision streams slice with these hard limits (each a
# default, overridable as usual): staging 3 x STAGE_LIMIT=30, compiled
# COMPILED_LIMIT=120, precision PREC_LIMIT=80, streams STREAMS_LIMIT=45, slice
# SLICE_LIMIT=60 (ResNet50 only, 10,000 training and 2,000 val + test images:
# SLICE_ARGS; its projection is of the same work) = 395 s,
# plus ~20 s of setup (imports, env.txt) = 415 s. A command cut by its limit
# keeps what it wrote; graphtime skips the cells its budget leaves no room for.
#   extra      EXTRA_CMD under EXTRA_LIMIT, with PY, OUT_DIR, DEVICE and REPO set
#              (a session's own measurement, e.g. gpuplan --compile).
# Every step runs under `timeout`, so a hang cannot eat the budget; the default
# steps take at most SYNC_LIMIT + (GPLAN_BUDGET + GPLAN_SLACK) + E2E_LIMIT + REPORT_LIMIT +
# 2 x DET_LIMIT + SBS_LIMIT + 2 x PERF_LIMIT + setup (the limits times LIMIT_SCALE). On the H100 of 2026-11-27 the
# machine started in about 30 s, and the e2e step needed more than 90 s (docs/speed.md).
# Output: ONE file, gpu_check.tar.gz under $OUT (else ./gpu_out), rewritten after
# every step so a run cut short still brings back what it measured (the device tool
# returns at most 8 files, 2 folders down). It holds gpu_check/: console.log, env.txt
# and each step's .log / .json, e2e/ (records without predictions, report/).
#
# The device image lacks relplot and uncertainty-calibration, which `bench report`
# needs: on THIS machine first run `bash benchmarks/gpu_wheels.sh` (it builds them
# into .whl/) and call the device with carry=[".whl"]; the script installs them.
set -u
if [ "${STEPS:-}" = issue47 ]; then  # issue 47's one call: limits summing to 7 minutes
    STEPS="staging compiled precision streams slice"
    : "${STAGE_LIMIT:=30}" "${COMPILED_LIMIT:=120}" "${PREC_LIMIT:=80}" "${STREAMS_LIMIT:=45}"
    : "${SLICE_LIMIT:=60}" "${SLICE_ARGS:=--backbones resnet50 --train 10000 --eval 2000}"
    : "${COMPILED_BUDGET:=75}"
fi
LIMIT_SCALE="${LIMIT_SCALE:-1}"  # multiplies every hard limit (see the limits below)
case "$LIMIT_SCALE" in
    ''|*[!0-9]*|0) echo "gpu_check.sh: LIMIT_SCALE must be a whole number >= 1, got '$LIMIT_SCALE'" >&2
                   exit 2 ;;
esac
REPO="$(cd "$(dirname "$0")/.." && pwd)"
BACK_DIR="${OUT:-$REPO/gpu_out}"   # what comes back: gpu_check.tar.gz alone
BACK_DIR="$(mkdir -p "$BACK_DIR" && cd "$BACK_DIR" && pwd)" || exit 2
SCRATCH="$(mktemp -d)" || exit 2
OUT_DIR="$SCRATCH/gpu_check"       # every step writes here; pack() bundles it
mkdir -p "$OUT_DIR"
PACK_RC=0
pack() {  # the tarball is replaced whole, never left half-written under its name
    tar -czf "$BACK_DIR/gpu_check.partial.tgz" -C "$SCRATCH" gpu_check &&
        mv -f "$BACK_DIR/gpu_check.partial.tgz" "$BACK_DIR/gpu_check.tar.gz" ||
        { echo "gpu_check.sh: could not write $BACK_DIR/gpu_check.tar.gz" >&2; PACK_RC=1; }
}
exec 3>&1 4>&2 > >(tee -a "$OUT_DIR/console.log") 2>&1
TEE_PID=$!
# The first Python that has torch and timm ($PYTHON, this checkout's .venv,
# python3, python): the device image's torch may sit behind either name.
PY=""
for cand in ${PYTHON:+"$PYTHON"} "$REPO/.venv/bin/python" python3 python; do
    if "$cand" -c "import torch, timm" >/dev/null 2>&1; then PY="$cand"; break; fi
done
if [ -z "$PY" ]; then
    echo "gpu_check.sh: no Python with torch and timm (tried: ${PYTHON:-} .venv python3 python)" >&2
    exit 2
fi
PY="$(command -v "$PY")"
case "$PY" in */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;; esac  # survives cd
DEVICE="${DEVICE:-cuda}"          # cpu only for a dry run of this script
SYNC_LIMIT="${SYNC_LIMIT:-40}"      # hard limit for bench.speed.syncs
GPLAN_BUDGET="${GPLAN_BUDGET:-100}"  # seconds for bench.speed.gpuplan's own budget
SBS_LIMIT="${SBS_LIMIT:-75}"        # hard limit for bench.speed.sidebyside (all K)
SBS_ARGS="${SBS_ARGS:-}"            # extra bench.speed.sidebyside flags (CPU dry run: a small backbone)
E2E_LIMIT="${E2E_LIMIT:-180}"       # both end-to-end sweeps (the fused one alone took ~50 s on an H100)
E2E_ARGS="${E2E_ARGS:-}"            # extra `bench run` flags (CPU dry run: a small backbone)
REPORT_LIMIT="${REPORT_LIMIT:-20}"  # hard limit for `bench report` over the fused records
PERF_LIMIT="${PERF_LIMIT:-60}"     # hard limit per bench.speed.perf run (it prints at the end)
DET_LIMIT="${DET_LIMIT:-40}"       # hard limit per deterministic on/off gpuplan run
DET_ARGS="${DET_ARGS:-}"           # extra gpuplan flags for step 7 (CPU dry run: --image-size 32)
PERF_STEPS="${PERF_STEPS:-100}"
PERF_REPEATS="${PERF_REPEATS:-2}"
SYNC_ARGS="${SYNC_ARGS:-}"          # extra bench.speed.syncs flags (CPU dry run: a small backbone)
GPLAN_ARGS="${GPLAN_ARGS:-}"        # extra gpuplan flags (CPU dry run: tiny settings)
PERF_ARGS="${PERF_ARGS:-}"
EXTRA_LIMIT="${EXTRA_LIMIT:-120}"   # hard limit for the `extra` step (EXTRA_CMD)
SBS_TIMEOUT="${SBS_TIMEOUT:-40}"    # bench.speed.sidebyside's own wait for each K's processes
GPLAN_SLACK="${GPLAN_SLACK:-45}"    # gpuplan's hard limit beyond its budget (imports, CUDA start)
# LIMIT_SCALE (a whole number, default 1) multiplies every hard limit and wait
# above, never a measurement budget (GPLAN_BUDGET, PERF_STEPS): a slow or
# loaded machine (the CPU test beside other jobs) takes longer, it does not hang.
for v in SYNC_LIMIT SBS_LIMIT E2E_LIMIT REPORT_LIMIT PERF_LIMIT DET_LIMIT EXTRA_LIMIT SBS_TIMEOUT GPLAN_SLACK; do
    printf -v "$v" '%s' "$(( ${!v} * LIMIT_SCALE ))"
done
CAPTURE_LIMIT="${CAPTURE_LIMIT:-120}"  # hard limit for bench.speed.capture (both runs)
CAPTURE_ARGS="${CAPTURE_ARGS:-}"       # extra bench.speed.capture flags (CPU dry run: --steps 2)
GTIME_BUDGET="${GTIME_BUDGET:-150}"    # bench.speed.graphtime's own budget (seconds)
GTIME_ARGS="${GTIME_ARGS:-}"           # extra graphtime flags (CPU dry run: a small backbone)
STIME_LIMIT="${STIME_LIMIT:-200}"      # hard limit for bench.speed.streamtime (28 and 224 px)
STIME_ARGS="${STIME_ARGS:-}"           # extra streamtime flags (CPU dry run: a small backbone)
STAGE_LIMIT="${STAGE_LIMIT:-60}"       # hard limit per command of the staging step (3 of them)
STAGE_ARGS="${STAGE_ARGS:-}"           # extra bench.speed.staging flags (CPU dry run: --images 800)
STAGE_STIME_ARGS="${STAGE_STIME_ARGS:-}"  # extra streamtime flags of the staging step
CAPTURE_LIMIT=$(( CAPTURE_LIMIT * LIMIT_SCALE ))
STIME_LIMIT=$(( STIME_LIMIT * LIMIT_SCALE ))
STAGE_LIMIT=$(( STAGE_LIMIT * LIMIT_SCALE ))
ALL_STEPS="staging capture streamtime graphtime syncs gpuplan e2e det sidebyside perf precision streams slice compiled extra"
STEPS="${STEPS:-capture staging streamtime graphtime gpuplan e2e}"  # which steps, in this order
export PYTHONUNBUFFERED=1

# The device image has torch, timm, tabulate, tqdm, scikit-learn but not this
# package; lay it out as installed (bench/ as it is) in a scratch folder.
RUN_DIR="$REPO"
if ! (cd "$REPO" && "$PY" -c "import bench.methods, bench.datasets" 2>/dev/null); then
    RUN_DIR="$SCRATCH/src"; mkdir -p "$RUN_DIR"
    cp -r "$REPO/bench" "$RUN_DIR/bench"
fi
cd "$RUN_DIR" || exit 1

# relplot and uncertainty-calibration (bench report's measures) are not on the
# device image: install the wheels benchmarks/gpu_wheels.sh built, if carried.
if ! "$PY" -c "import relplot, calibration" >/dev/null 2>&1; then
    if ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$SCRATCH/site" "$REPO"/.whl/*.whl &&
            export PYTHONPATH="$SCRATCH/site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "note: no relplot / uncertainty-calibration and no .whl/ carried: step 4's" \
             "bench report will fail (run bash benchmarks/gpu_wheels.sh first, carry .whl)"
    fi
fi

{
    date -u
    echo "repo $REPO, run from $RUN_DIR, python $PY, device $DEVICE"
    git -C "$REPO" log -1 --oneline 2>/dev/null || echo "(no git)"
    nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
    "$PY" -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__, \
'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
} 2>&1 | tee "$OUT_DIR/env.txt"
pack

# Each step is a function; STEPS names which run and in what order (the
# default puts what the issue's "done when" needs first: a run cut short by
# the device's limit loses the least important steps).
step_capture() {
    echo "== capture: bench.speed.capture --device $DEVICE (limit ${CAPTURE_LIMIT}s)"
    local cases="sl1h,4hml,fused 4hml x3"
    # shellcheck disable=SC2086
    timeout -k 5 "$CAPTURE_LIMIT" bash -c '"$0" -m bench.speed.capture --device "$1" --no-explain "${@:3}" &&
        "$0" -m bench.speed.capture --device "$1" --no-explain --backbone resnet50 --cases "$2" "${@:3}"' \
        "$PY" "$DEVICE" "$cases" $CAPTURE_ARGS 2>&1 | tee "$OUT_DIR/capture.log"
    echo "capture exit: ${PIPESTATUS[0]}"
}

step_staging() {
    echo "== staging: bench.speed.staging, one PathMNIST epoch per step vs per epoch (limit ${STAGE_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 5 "$STAGE_LIMIT" "$PY" -m bench.speed.staging --device "$DEVICE" $STAGE_ARGS \
        2>&1 | tee "$OUT_DIR/staging.log"
    echo "staging exit: ${PIPESTATUS[0]}"
    local ahead
    for ahead in false true; do  # the clock over epochs 2 and 3 includes their staging
        echo "== staging: streamtime 8 x mixup, 3 epochs, stage_ahead=$ahead (limit ${STAGE_LIMIT}s)"
        # shellcheck disable=SC2086
        timeout -k 5 "$STAGE_LIMIT" "$PY" -m bench.speed.streamtime --device "$DEVICE" --size 28 \
            --members 8 --fuse-as streams --method mixup --steps 200 --epochs 3 \
            --stage-ahead "$ahead" --out "$OUT_DIR/stage_ahead_$ahead.json" $STAGE_STIME_ARGS \
            2>&1 | tee "$OUT_DIR/stage_ahead_$ahead.log"
        echo "stage_ahead=$ahead exit: ${PIPESTATUS[0]}"
    done
}

step_graphtime() {
    echo "== graphtime: bench.speed.graphtime (budget ${GTIME_BUDGET}s)"
    # shellcheck disable=SC2086
    timeout -k 10 $((GTIME_BUDGET + GPLAN_SLACK)) "$PY" -m bench.speed.graphtime --device "$DEVICE" \
        --budget-s "$GTIME_BUDGET" --out "$OUT_DIR/graphtime.json" $GTIME_ARGS \
        2>&1 | tee "$OUT_DIR/graphtime.log"
    echo "graphtime exit: ${PIPESTATUS[0]}"
}

step_streamtime() {
    echo "== streamtime: bench.speed.streamtime, fused groups as streams vs vmap (limit ${STIME_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$STIME_LIMIT" bash -c '"$0" -m bench.speed.streamtime --device "$1" --size 28 \
            --members 1,2,4,8 --out "$2/streamtime28.json" "${@:3}" &&
        "$0" -m bench.speed.streamtime --device "$1" --size 224 --members 1,2,4 \
            --out "$2/streamtime224.json" "${@:3}"' \
        "$PY" "$DEVICE" "$OUT_DIR" $STIME_ARGS 2>&1 | tee "$OUT_DIR/streamtime.log"
    echo "streamtime exit: ${PIPESTATUS[0]}"
}

step_syncs() {
    echo "== syncs: bench.speed.syncs (limit ${SYNC_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 5 "$SYNC_LIMIT" "$PY" -m bench.speed.syncs --device "$DEVICE" --steps 3 $SYNC_ARGS \
        2>&1 | tee "$OUT_DIR/syncs.log"
    echo "syncs exit: ${PIPESTATUS[0]}"
}

step_gpuplan() {
    echo "== gpuplan: bench.speed.gpuplan (budget ${GPLAN_BUDGET}s)"
    # +GPLAN_SLACK: imports and CUDA start-up come before gpuplan's clock, and a job
    # checks the clock between steps (a first 224 px step with cuDNN's search can run long)
    # shellcheck disable=SC2086
    timeout -k 10 $((GPLAN_BUDGET + GPLAN_SLACK)) "$PY" -m bench.speed.gpuplan --device "$DEVICE" \
        --budget-s "$GPLAN_BUDGET" --out "$OUT_DIR/gpuplan.json" $GPLAN_ARGS \
        2>&1 | tee "$OUT_DIR/gpuplan.log"
    echo "gpuplan exit: ${PIPESTATUS[0]}"
}

step_sidebyside() {
    echo "== sidebyside: bench.speed.sidebyside (limit ${SBS_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 5 "$SBS_LIMIT" "$PY" -m bench.speed.sidebyside --device "$DEVICE" --processes 1,2,3 \
        --steps 30 --warmup 5 --timeout-s "$SBS_TIMEOUT" --out "$OUT_DIR/sidebyside.json" $SBS_ARGS \
        2>&1 | tee "$OUT_DIR/sidebyside.log"
    echo "sidebyside exit: ${PIPESTATUS[0]}"
}

step_e2e() {
    echo "== e2e: bench run, --fuse methods vs unfused (limit ${E2E_LIMIT}s)"
    local E2E=(run --method sl1h,mixup,dca,2hml,4hml --dataset digits --backbone resnet18 --seeds 1
               --profile quick --set cycles=1 --set epochs_per_cycle=2 --device "$DEVICE" --no-progress)
    # shellcheck disable=SC2086
    timeout -k 5 "$E2E_LIMIT" bash -c '"$0" -m bench.cli "${@:3}" --results "$1/e2e/fused" --fuse methods &&
        "$0" -m bench.cli "${@:3}" --results "$1/e2e/single" &&
        PYTHONPATH="$PWD" "$0" "$2/benchmarks/compare_records.py" "$1/e2e/single" "$1/e2e/fused"' \
        "$PY" "$OUT_DIR" "$REPO" "${E2E[@]}" $E2E_ARGS 2>&1 | tee "$OUT_DIR/e2e.log"
    echo "e2e exit: ${PIPESTATUS[0]}"
    echo "== report: bench report over the fused records (limit ${REPORT_LIMIT}s)"
    timeout -k 5 "$REPORT_LIMIT" "$PY" -m bench.cli report --results "$OUT_DIR/e2e/fused" \
        --out "$OUT_DIR/e2e/report" --no-plots --no-progress 2>&1 | tee "$OUT_DIR/report.log"
    echo "report exit: ${PIPESTATUS[0]}"
    find "$OUT_DIR/e2e" -name predictions.npz -delete 2>/dev/null  # keep what comes back small
}

step_perf() {
    local PERF=(--device "$DEVICE" --backbone resnet50 --heads 4 --size 28 --steps "$PERF_STEPS"
                --repeats "$PERF_REPEATS" --eval-images 2048 --fused-seeds 5 --ref-workers 4)
    echo "== perf: bench.speed.perf fp32 (limit ${PERF_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$PERF_LIMIT" "$PY" -m bench.speed.perf "${PERF[@]}" $PERF_ARGS \
        2>&1 | tee "$OUT_DIR/perf_fp32.log"
    echo "perf fp32 exit: ${PIPESTATUS[0]}"
    pack
    echo "== perf: bench.speed.perf bf16 + channels_last (limit ${PERF_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$PERF_LIMIT" "$PY" -m bench.speed.perf "${PERF[@]}" --set bf16=true \
        --set channels_last=true $PERF_ARGS 2>&1 | tee "$OUT_DIR/perf_bf16.log"
    echo "perf bf16 exit: ${PIPESTATUS[0]}"
}

step_det() {
    local det flag
    for det in off on; do
        echo "== det: deterministic=$det, gpuplan kvasir resnet50 4 heads alone (limit ${DET_LIMIT}s)"
        flag=false; [ "$det" = on ] && flag=true
        # shellcheck disable=SC2086
        timeout -k 5 "$DET_LIMIT" "$PY" -m bench.speed.gpuplan --device "$DEVICE" --datasets kvasir \
            --backbones resnet50 --heads 4 --strategies single --steps 15 --warmup 3 \
            --eval-images 256 --budget-s $((DET_LIMIT / LIMIT_SCALE - 10)) --set deterministic=$flag \
            --no-progress --out "$OUT_DIR/det_$det.json" $DET_ARGS 2>&1 | tee "$OUT_DIR/det_$det.log"
        echo "deterministic=$det exit: ${PIPESTATUS[0]}"
        pack
    done
}

# ---- issue 47 (points 4, 6, 7): precision, more streams, the end-to-end slice.
# Not in the CPU dry run's step list (tests/speed/test_gpu_check_script.py is
# the suite's slowest item); they and `compiled` were dry-run by hand on the CPU, and
# tests/speed/test_gpu_check_compiled.py checks the compiled step's flags and that the
# issue47 preset's limits fit 7 minutes.
PREC_LIMIT="${PREC_LIMIT:-150}"      # 224 px precisions + Swin-T TF32 (~2 GPU-minutes)
STREAMS_LIMIT="${STREAMS_LIMIT:-90}" # 16 and 32 streams at 28 px
SLICE_LIMIT="${SLICE_LIMIT:-240}"    # one PathMNIST-shaped epoch, 8 methods x 3 backbones
PREC_ARGS="${PREC_ARGS:-}"; STREAMS_ARGS="${STREAMS_ARGS:-}"; SLICE_ARGS="${SLICE_ARGS:-}"

step_precision() {
    echo "== precision: streamtime at 224 px, 4 streams, released vs tf32 vs bf16; Swin-T tf32 (limit ${PREC_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$PREC_LIMIT" bash -c 'for spec in resnet50:released resnet50:tf32 \
            resnet50:bf16 swin_tiny:released swin_tiny:tf32; do
        "$0" -m bench.speed.streamtime --device "$1" --backbone "${spec%%:*}" --size 224 \
            --members 4 --fuse-as streams --steps 40 --precision "${spec##*:}" \
            --out "$2/precision_${spec/:/_}.json" "${@:3}" || exit $?
        done' "$PY" "$DEVICE" "$OUT_DIR" $PREC_ARGS 2>&1 | tee "$OUT_DIR/precision.log"
    echo "precision exit: ${PIPESTATUS[0]}"
}

step_streams() {
    echo "== streams: streamtime at 28 px, 16 and 32 streams (limit ${STREAMS_LIMIT}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$STREAMS_LIMIT" "$PY" -m bench.speed.streamtime --device "$DEVICE" --size 28 \
        --members 16,32 --fuse-as streams --out "$OUT_DIR/streams.json" $STREAMS_ARGS \
        2>&1 | tee "$OUT_DIR/streams.log"
    echo "streams exit: ${PIPESTATUS[0]}"
}

step_slice() {
    echo "== slice: bench run on a PathMNIST-shaped synthetic set, one epoch, 8 methods x 1 seed (limit ${SLICE_LIMIT}s)"
    # shellcheck disable=SC2086
    # PYTHONPATH: a script's folder, not the working one, is on its path (bench/ is here)
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 "$SLICE_LIMIT" "$PY" \
        "$REPO/benchmarks/e2e_slice.py" --device "$DEVICE" \
        --work "$SCRATCH/slice" --out "$OUT_DIR/slice.json" $SLICE_ARGS 2>&1 | tee "$OUT_DIR/slice.log"
    echo "slice exit: ${PIPESTATUS[0]}"
}

# ---- issue 47 (point 3): the compiled step, eager vs compiled on the card.
COMPILED_LIMIT="${COMPILED_LIMIT:-240}"  # hard limit of the whole step (both commands)
COMPILED_BUDGET="${COMPILED_BUDGET:-150}"  # graphtime's own budget: cells left are skipped
COMPILED_ARGS="${COMPILED_ARGS:-}"       # extra graphtime flags (CPU dry run: a small backbone)
CCAPTURE_ARGS="${CCAPTURE_ARGS:-}"       # extra capture flags (CPU dry run: --size 16 --steps 2)
COMPILED_LIMIT=$(( COMPILED_LIMIT * LIMIT_SCALE ))

step_compiled() {
    echo "== compiled: graphtime 28 px x25/x8/x1 captured vs compiled-captured, then the" \
         "capture proof's compiled cases (limit ${COMPILED_LIMIT}s, graphtime budget ${COMPILED_BUDGET}s)"
    local paths=captured,compiled-captured
    [ "$DEVICE" = cuda ] || paths=graph-safe,compiled  # nothing is captured on a CPU
    # the biggest group first: graphtime's budget drops the last cells, not the headline
    # shellcheck disable=SC2086
    timeout -k 10 "$COMPILED_LIMIT" bash -c '"$0" -m bench.speed.graphtime --device "$1" \
            --cells 28:25,28:8,28:1 --streams 1 --paths "$2" --budget-s "$3" \
            --out "$4/compiled.json" $5;
        "$0" -m bench.speed.capture --device "$1" --no-explain \
            --cases "compiled sl1h,compiled fused 5 one-head" $6' \
        "$PY" "$DEVICE" "$paths" "$COMPILED_BUDGET" "$OUT_DIR" "$COMPILED_ARGS" "$CCAPTURE_ARGS" \
        2>&1 | tee "$OUT_DIR/compiled.log"
    echo "compiled exit: ${PIPESTATUS[0]}"
}

step_extra() {  # EXTRA_CMD: one more command of a session's choosing (a rerun, --compile)
    [ -n "${EXTRA_CMD:-}" ] || { echo "extra: EXTRA_CMD is empty"; return; }
    echo "== extra: $EXTRA_CMD (limit ${EXTRA_LIMIT}s)"
    PY="$PY" OUT_DIR="$OUT_DIR" DEVICE="$DEVICE" REPO="$REPO" timeout -k 5 "$EXTRA_LIMIT" bash -c "$EXTRA_CMD" 2>&1 | tee "$OUT_DIR/extra.log"
    echo "extra exit: ${PIPESTATUS[0]}"
}

for step in $STEPS; do
    if ! declare -F "step_$step" >/dev/null; then
        echo "gpu_check.sh: unknown step '$step' in STEPS (allowed: $ALL_STEPS)"; continue
    fi
    "step_$step"
    pack
done

echo "== done; $BACK_DIR/gpu_check.tar.gz holds:"
ls -l "$OUT_DIR"
exec 1>&3 2>&4 3>&- 4>&-
# console.log complete before the last pack; at most 5 s, as a stray child of a
# killed step could hold tee's pipe open for ever
for _ in $(seq 50); do kill -0 "$TEE_PID" 2>/dev/null || break; sleep 0.1; done
pack
rm -rf "$SCRATCH"
exit "$PACK_RC"  # the steps' own exits are in console.log; this says the tarball is whole
