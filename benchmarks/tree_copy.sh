#!/usr/bin/env bash
# benchmarks/tree_copy.sh NAME: a throw-away copy of the working tree (tracked and untracked,
# not ignored: no venv, no results) in a new temp dir, importable from PYTHONPATH ahead of the
# editable install; prints its path. Used by mutation.sh, breakages.sh and help_texts.py.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXX")
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work"
echo "$work"
