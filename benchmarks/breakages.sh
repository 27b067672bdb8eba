#!/usr/bin/env bash
# The five deliberate breakages the suite must catch, each applied to a throw-away copy of the
# working tree, with the tests that must catch it (not part of CI: 45 s on 2 cores).
#
#   benchmarks/breakages.sh        # prints, per breakage, the failing tests; "NOT CAUGHT" if none
set -u
cd "$(dirname "$0")/.."
REPO=$PWD; PY=${PYTHON:-$REPO/.venv/bin/python}; missed=0
run() {  # name, file, old text, new text, tests...
  local name=$1 file=$2 old=$3 new=$4; shift 4
  local w; w=$("$REPO/benchmarks/tree_copy.sh" breakage)
  OLD=$old NEW=$new F=$w/$file "$PY" -c "
import os; p, o = os.environ['F'], os.environ['OLD']; s = open(p).read()
assert s.count(o) == 1, 'breakage no longer applies: ' + o
open(p, 'w').write(s.replace(o, os.environ['NEW']))" || { missed=1; rm -rf "$w"; return; }
  echo "== $name"
  local out; out=$(cd "$w" && PYTHONPATH=$w "$PY" -m pytest -q -p no:cacheprovider "$@" 2>&1)
  echo "$out" | grep -E "^FAILED" | sed 's/ - .*//; s/^/   /'
  echo "$out" | grep -qE "^FAILED" || { echo "   NOT CAUGHT"; missed=1; }
  rm -rf "$w"
}
run "MultiHead.setup ignores the seed" bench/methods/mhml.py \
  "class_weights(num_classes, self.heads, seed, self.multi_loss" \
  "class_weights(num_classes, self.heads, 0, self.multi_loss" \
  tests/methods/test_weight_groups.py tests/methods/test_mhml.py
run "Mixup.batch returns the images unmixed" bench/methods/mixup.py \
  "return lam * x + rest * x[perm], (y, y[perm], lam, rest)" \
  "return lam * x + rest * x, (y, y[perm], lam, rest)" \
  tests/methods/test_mixup_replay.py tests/methods/test_methods.py
run "temperature scaling fitted on test" bench/calib/variants.py \
  't = fit_temperature(p["val_logits"], p["val_labels"])' \
  't = fit_temperature(p["test_logits"], p["test_labels"])' \
  tests/calib/test_ts_ensemble_independent.py tests/report/test_cells.py
run "deep ensemble averages logits" bench/calib/temperature.py \
  "return np.mean([head_probs(lg) for lg in logits_list], axis=0)" \
  "return head_probs(np.mean(logits_list, axis=0))" \
  tests/calib/test_ts_ensemble_independent.py tests/calib/test_calibration.py
run "momentum left out of the hash" bench/core/config.py \
  'momentum: float = setting(0.0, "SGD momentum (paper: 0)",' \
  'momentum: float = setting(0.0, "SGD momentum (paper: 0)", in_hash=False,' \
  tests/core/test_config_hash.py tests/core/test_registry_config.py
exit $missed
