#!/usr/bin/env bash
# Build, on THIS machine (it has the package registries), the wheels of the
# pure-Python dependencies that the GPU machine's image lacks and that
# benchmarks/gpu_check.sh needs there: relplot and uncertainty-calibration
# (`bench report`'s smooth ECE and debiased calibration error) and their own
# dependencies deprecation and parameterized. medmnist and submitit are missing
# there too but the check needs neither (synthetic data, no SLURM). The versions
# are the ones installed in this checkout's .venv, so both machines compute alike.
# Then call the device with carry=[".whl"] (about 64 KB); gpu_check.sh installs them.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$REPO/.venv/bin/python}"
PKGS=(relplot deprecation uncertainty-calibration parameterized)
# a package missing from .venv stops here (set -e sees a failed $(...))
specs="$("$PY" -c 'import sys, importlib.metadata as m
for p in sys.argv[1:]: print(f"{p}=={m.version(p)}")' "${PKGS[@]}")"
mapfile -t SPECS <<<"$specs"
NEW="$(mktemp -d)"
trap 'rm -rf "$NEW"' EXIT
"$PY" -m pip wheel -q --no-deps --wheel-dir "$NEW" "${SPECS[@]}"
rm -rf "$REPO/.whl" && mv "$NEW" "$REPO/.whl"  # the old wheels go only once all are built
ls -l "$REPO/.whl"
