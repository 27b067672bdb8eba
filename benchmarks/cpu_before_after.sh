#!/usr/bin/env bash
# Is this checkout's CPU training slower than COMMIT's? The quick demo's
# regime (digits, quick profile, 10 training images a class) for a few methods,
# trained ROUNDS times by each tree in turn (ABAB..., so load drifts hit both),
# each run's own train_seconds (metrics.json: the loop's cycles, not start-up)
# summed per tree. Prints the sums and new/base.
#
#     bash benchmarks/cpu_before_after.sh COMMIT [ROUNDS] [OUT]
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
COMMIT="${1:?usage: bash benchmarks/cpu_before_after.sh COMMIT [ROUNDS] [OUT]}"
ROUNDS="${2:-2}"
OUT="${3:-/tmp/cpu_before_after}"
# shellcheck source=benchmarks/base_tree.sh
source "$REPO/benchmarks/base_tree.sh"  # $BASE: COMMIT's tree and venv
GRID=(--method sl1h,mixup,2hml,4hml --dataset digits --seeds 1 --profile quick
      --data-opt train_per_class=10 --jobs 1 --no-progress)
for r in $(seq "$ROUNDS"); do
    for tree in base new; do
        dir="$BASE"; [ $tree = new ] && dir="$REPO"
        (cd "$dir" && OMP_NUM_THREADS=1 .venv/bin/bench run "${GRID[@]}" \
            --results "$OUT/$tree-$r" >"$OUT/$tree-$r.log" 2>&1) ||
            { echo "cpu_before_after.sh: bench run failed, see $OUT/$tree-$r.log" >&2; exit 1; }
    done
done
"$REPO/.venv/bin/python" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
total = {t: sum(json.loads(p.read_text())["train_seconds"]
                for p in out.glob(f"{t}-*/**/metrics.json")) for t in ("base", "new")}
runs = {t: len(list(out.glob(f"{t}-*/**/metrics.json"))) for t in total}
print(f"base {total['base']:.1f} s ({runs['base']} runs), new {total['new']:.1f} s "
      f"({runs['new']} runs): new / base = {total['new'] / total['base']:.3f}")
PY
