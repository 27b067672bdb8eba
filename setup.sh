#!/usr/bin/env bash
# Create .venv and install mhml-bench (editable) with its test extras.
# Idempotent: a second call only checks that everything is installed (pip is
# skipped while setup.sh and pyproject.toml are unchanged; see below).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
step() { echo "setup.sh: $*" >&2; }  # a line before each long step: a fresh
# machine spends minutes in pip and apt with nothing else printed
if [ ! -x .venv/bin/python ]; then
    step "creating .venv"
    "$PY" -m venv .venv
fi
# pip's own check of an installed .venv takes a minute on a loaded 2-core machine:
# skipped while setup.sh and pyproject.toml are those of the last full install
# and the package still imports (a changed pin or dependency installs again)
STAMP=.venv/.setup-stamp
WANT="$({ cat setup.sh pyproject.toml 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] \
        && .venv/bin/python -c "import bench.methods, bench.datasets, torch" 2>/dev/null; then
    step "python packages already installed (setup.sh and pyproject.toml unchanged)"
else
    step "installing torch and torchvision (minutes on a fresh machine)"
    # torch/torchvision pinned to releases that install offline from this
    # workplace's local index; anywhere else pip fetches them from PyPI.
    .venv/bin/python -m pip install -q --disable-pip-version-check \
        "torch==2.14.1" "torchvision==0.29.1" 2>&1 | grep -v '^WARNING: Location' || true
    step "installing mhml-bench and its test extras"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,extra]" 2>&1 \
        | grep -v '^WARNING: Location' || true
    .venv/bin/python -c "import bench.methods, bench.datasets, torch" \
        || { echo "setup.sh: installation failed" >&2; exit 1; }
    echo "$WANT" > "$STAMP"
fi
# pdflatex for `bench report` tables and their compile test (booktabs,
# rotating, amssymb all come with texlive-latex-recommended). Only where it is
# missing and apt-get exists (root, or passwordless sudo); never fatal.
if ! command -v pdflatex >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    step "installing pdflatex (texlive-latex-recommended) with apt-get"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends texlive-latex-recommended; } >/dev/null 2>&1 \
        || echo "setup.sh: could not install texlive-latex-recommended (pdflatex); LaTeX compile tests will fail" >&2
fi
# medmnistc (--eval shift, bench data shift) imports wand (ImageMagick's
# MagickWand library) and cv2 (libGL, libglib): system libraries pip cannot
# install. Only where the import fails and apt-get exists; never fatal (the
# commands that need them name what is missing in one line).
if ! .venv/bin/python -c "import medmnistc.corruptions.registry" >/dev/null 2>&1 \
        && command -v apt-get >/dev/null 2>&1; then
    step "installing medmnistc's system libraries (MagickWand, libGL, libglib) with apt-get"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends libmagickwand-6.q16-6 libgl1 libglib2.0-0; } >/dev/null 2>&1 \
        || echo "setup.sh: could not install libmagickwand-6.q16-6 libgl1 libglib2.0-0; --eval shift and bench data shift will name what is missing" >&2
fi
step "done"
