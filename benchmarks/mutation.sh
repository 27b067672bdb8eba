#!/usr/bin/env bash
# Mutation testing of the numeric core with mutmut (not part of CI: minutes per module).
#
#   benchmarks/mutation.sh [module ...]     # default: every module below, smallest first
#
# Each module is mutated in a throw-away copy of the working tree (mutmut edits
# files in place) and tested only against the tests that cover it, so a run fits
# a 2-core machine. Surviving mutants are printed with `mutmut show`; each is either
# equivalent or gets a test. Needs the `mutation` extra: pip install -e ".[mutation]".
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-$REPO/.venv/bin/python}

# module name -> "source file | tests covering it"
declare -A MOD=(
  [ranks]="bench/report/numbers/ranks.py|tests/report/test_ranks.py tests/report/test_rank_properties.py"
  [temperature]="bench/calib/temperature.py|tests/calib/test_calibration.py tests/calib/test_ts_ensemble_independent.py"
  [measures]="bench/calib/measures/functions.py bench/calib/metrics.py|tests/calib/test_metrics.py tests/calib/test_metric_properties.py tests/calib/test_measure_functions.py"
  [config]="bench/core/config.py|tests/core/test_config_values.py tests/core/test_registry_config.py tests/core/test_config_hash.py tests/cli/test_reference_doc.py"
  [variants]="bench/calib/variants.py|tests/calib/test_ts_ensemble_independent.py tests/report/test_cells.py tests/report/test_measures.py"
  [mhml]="bench/methods/mhml.py|tests/methods/test_mhml.py tests/methods/test_weight_groups.py tests/cli/test_reference_doc.py"
  [mixup]="bench/methods/mixup.py|tests/methods/test_mixup_replay.py tests/methods/test_method_bounds.py tests/methods/test_methods.py tests/cli/test_reference_doc.py"
  [losses]="bench/methods/ls.py bench/methods/mbls.py bench/methods/dca.py bench/methods/focal.py bench/methods/sl1h.py|tests/methods/test_methods.py tests/methods/test_method_bounds.py tests/cli/test_reference_doc.py"
  [aggregate]="bench/report/numbers/aggregate.py|tests/report/test_report.py tests/report/test_latex.py tests/report/test_frame.py tests/report/test_report_cost.py tests/calib/test_ts_ensemble_independent.py tests/cli/test_plan_checks.py"
)
ORDER=(ranks mixup config temperature variants measures mhml losses aggregate)
[ $# -gt 0 ] && ORDER=("$@")

for name in "${ORDER[@]}"; do
  spec=${MOD[$name]:?unknown module $name (choose from: ${!MOD[*]})}
  src=${spec%%|*}; tests=${spec#*|}
  work=$("$REPO/benchmarks/tree_copy.sh" "mutation-$name")
  start=$(date +%s)
  # mutmut 2.5 can hang in a futex: the watchdog restarts it (pristine sources restored first)
  PYTHON=$PY "$REPO/benchmarks/mutation_resume.sh" "$work" "${src// /,}" "$tests" || true
  secs=$(( $(date +%s) - start ))
  echo "== $name ($src): ${secs}s, work dir $work"
  # counts by status (ok_suspicious = killed, but slowly: a failing hypothesis test shrinks)
  "$PY" - "$work/.mutmut-cache" <<'PYEOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
counts = dict(db.execute("select status, count(*) from Mutant group by status").fetchall())
print("   " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
for (pk,) in db.execute("select id from Mutant where status in ('bad_survived', 'bad_timeout')"):
    print(f"   survivor {pk}")
PYEOF
  for pk in $("$PY" -c "import sqlite3,sys; print(*[r[0] for r in sqlite3.connect(sys.argv[1]).execute(\"select id from Mutant where status='bad_survived'\")])" "$work/.mutmut-cache"); do
    (cd "$work" && "$PY" -m mutmut show "$pk" | grep '^[-+][^-+]' | sed "s/^/   #$pk /")
  done
done
