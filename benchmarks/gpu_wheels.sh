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
mapfile -t SPECS < <("$PY" -c 'import sys, importlib.metadata as m
for p in sys.argv[1:]: print(f"{p}=={m.version(p)}")' "${PKGS[@]}")
rm -rf "$REPO/.whl"
"$PY" -m pip wheel -q --no-deps --wheel-dir "$REPO/.whl" "${SPECS[@]}"
ls -l "$REPO/.whl"
