#!/usr/bin/env bash
# benchmarks/mutation_resume.sh WORKDIR SRC "TESTS": continue a mutmut run in its work dir; a watchdog
# restarts mutmut when the cache shows no progress for 150 s (mutmut 2.5 can hang in a futex)
W=$1; SRC=$2; TESTS=$3
PY=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
cd "$W" || exit 1
# pristine sources: a killed mutmut leaves its mutant in place
mkdir -p .pristine; for f in ${SRC//,/ }; do [ -f ".pristine/${f//\//_}" ] || cp "$f" ".pristine/${f//\//_}"; done
restore() { for f in ${SRC//,/ }; do cp ".pristine/${f//\//_}" "$f"; done; }
count() { [ -f .mutmut-cache ] || { echo 0 1; return; }; python3 -c "
import sqlite3; db=sqlite3.connect('.mutmut-cache'); print(db.execute(\"select count(*) from Mutant where status!='untested'\").fetchone()[0], db.execute(\"select count(*) from Mutant where status='untested'\").fetchone()[0])"; }
while :; do
  read done left < <(count)
  [ "$left" = 0 ] && break
  restore
  PYTHONPATH=$W nice -n 10 $PY -m mutmut run --paths-to-mutate "$SRC" \
      --runner "$PY -m pytest -x -q -p no:cacheprovider -p no:randomly $TESTS" \
      --tests-dir tests --simple-output --no-progress >>"$W/run.log" 2>&1 &
  pid=$!
  last=$done; t=0
  while kill -0 $pid 2>/dev/null; do
    sleep 15; t=$((t+15))
    read now left < <(count)
    if [ "$now" != "$last" ]; then last=$now; t=0; fi
    if [ $t -ge 150 ]; then echo "watchdog: no progress in 150 s at $now done, restarting" >>"$W/watchdog.log"; pkill -P $pid; kill $pid; sleep 2; break; fi
  done
  wait $pid 2>/dev/null
done
echo "finished $(date)" >> "$W/watchdog.log"
