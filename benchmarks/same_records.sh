#!/usr/bin/env bash
# Does this checkout train the same records as another commit? The tiny grid of
# issue 38 (digits, the paper's eight methods and focal, 2 seeds, quick profile,
# one epoch, 20 training images a class), unfused and `--fuse methods`, trained
# by COMMIT (a worktree with its own venv over this checkout's packages) and by
# this checkout (default step, then `--set graph=true`; and `--fuse methods --set
# fuse_as=streams`, compared with the unfused records); every predictions.npz
# compared bit for bit, record by record (same relative path = same config hash).
#
#     bash benchmarks/same_records.sh COMMIT [OUT]       # OUT default: /tmp/same_records
#
# CPU, about 10-20 minutes on 2 busy cores. Prints one line per comparison;
# exit 1 if any record differs or is missing.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
COMMIT="${1:?usage: bash benchmarks/same_records.sh COMMIT [OUT]}"
OUT="${2:-/tmp/same_records}"
# shellcheck source=benchmarks/base_tree.sh
source "$REPO/benchmarks/base_tree.sh"  # $BASE: COMMIT's tree and venv
GRID=(--method paper,focal --dataset digits --seeds 2 --profile quick --set cycles=1
      --set epochs_per_cycle=1 --data-opt train_per_class=20 --jobs 2 --no-progress)
run() {  # tree, results, extra flags
    (cd "$1" && OMP_NUM_THREADS=1 .venv/bin/bench run "${GRID[@]}" --results "$2" "${@:3}" \
        >"$2.log" 2>&1) || { echo "same_records.sh: bench run failed, see $2.log" >&2; exit 1; }
}
for fuse in single fused; do
    F=(); [ $fuse = fused ] && F=(--fuse methods)
    run "$BASE" "$OUT/base-$fuse" ${F[@]+"${F[@]}"}
    run "$REPO" "$OUT/new-$fuse" ${F[@]+"${F[@]}"}
    run "$REPO" "$OUT/graph-$fuse" ${F[@]+"${F[@]}"} --set graph=true
done
# a fused group as runs on streams (fuse_as=streams) writes the unfused records
run "$REPO" "$OUT/streams-single" --fuse methods --set fuse_as=streams
status=0
for fuse in single fused; do
    MORE=(); [ $fuse = single ] && MORE=("$OUT/streams-single")
    "$REPO/.venv/bin/python" - "$OUT/base-$fuse" "$OUT/new-$fuse" "$OUT/graph-$fuse" \
        ${MORE[@]+"${MORE[@]}"} <<'PY' || status=1
import sys
from pathlib import Path
import numpy as np
base, *others = [Path(p) for p in sys.argv[1:]]
recs = sorted(p.parent for p in base.rglob("predictions.npz"))
bad = 0
for o in others:
    same = 0
    for r in recs:
        q = o / r.relative_to(base) / "predictions.npz"
        if q.exists():
            a, b = np.load(r / "predictions.npz"), np.load(q)
            same += sorted(a.files) == sorted(b.files) and all(
                np.array_equal(a[k], b[k]) for k in a.files)
    print(f"{o.name}: {same} of {len(recs)} records of {base.name} bit-identical (same hash)")
    bad += same != len(recs) or not recs
sys.exit(1 if bad else 0)
PY
done
exit $status
