#!/usr/bin/env bash
# Set everything up (see setup.sh) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
exec .venv/bin/python -m pytest "$@"
