#!/usr/bin/env bash
# Set everything up (see setup.sh) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
# Two workers (pytest-xdist), each given whole test modules (--dist loadscope) in
# collection order, slowest first (tests/conftest.py, SLOW_FIRST), so
# a module-scoped fixture is built once and the SLURM module's session cluster
# is started by one worker only; BENCH_TEST_WORKERS=0 runs in this one process.
exec .venv/bin/python -m pytest -n "${BENCH_TEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder "$@"
