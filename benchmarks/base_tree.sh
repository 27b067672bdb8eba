# Sourced by the before/after benchmarks (same_records.sh, cpu_before_after.sh):
# with REPO, COMMIT and OUT set, makes OUT afresh and checks COMMIT out in
# $BASE (OUT/base-tree), a git worktree removed on exit, with its own venv
# over this checkout's installed packages (only the harness's code differs).
BASE="$OUT/base-tree"
rm -rf "$OUT" && mkdir -p "$OUT"
git -C "$REPO" worktree add -q --detach "$BASE" "$COMMIT"
trap 'git -C "$REPO" worktree remove --force "$BASE"' EXIT
python3 -m venv "$BASE/.venv"
echo "$REPO/.venv/lib/python3.11/site-packages" > "$BASE/.venv/lib/python3.11/site-packages/main.pth"
"$BASE/.venv/bin/python" -m pip install -q --no-deps -e "$BASE" >/dev/null
