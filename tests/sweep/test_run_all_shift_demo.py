"""run_all.sh --quick: after the main demo, the shift and OOD demo (its own
results folder beside RESULTS, its own report in REPORTS/shift-demo, the time
it adds printed), with a stub bench that logs its calls (as
tests/sweep/test_sweep.py does for the main demo)."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = "--dataset digits --data-opt train_per_class=10 --data-opt test_per_class=5"


def _stub_repo(tmp_path, fail: str = "") -> Path:
    """run_all.sh beside a stub setup.sh and a stub bench that logs each call;
    the call starting with `fail` exits 3."""
    repo = tmp_path / "repo"
    (repo / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(REPO / "run_all.sh", repo / "run_all.sh")
    (repo / "setup.sh").write_text("#!/bin/sh\n")
    check = f'case "$*" in "{fail}"*) exit 3;; esac\n' if fail else ""
    (repo / ".venv" / "bin" / "bench").write_text(
        f"#!/bin/sh\necho \"$*\" >> calls.txt\n{check}exit 0\n")
    for f in ("run_all.sh", "setup.sh", ".venv/bin/bench"):
        (repo / f).chmod(0o755)
    return repo


def _quick(repo, *extra, **env):
    done = subprocess.run(["./run_all.sh", "--quick", *extra], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, "JOBS": "2", **env})
    calls = (repo / "calls.txt").read_text().splitlines()
    (repo / "calls.txt").unlink()
    return done, calls


def test_quick_mode_runs_the_shift_and_ood_demo_after_the_main_demo(tmp_path):
    repo = _stub_repo(tmp_path)
    done, calls = _quick(repo, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith("run --grid grids/quick.toml ")
    assert calls[1] == "report --results results --out reports"
    assert calls[2:] == [
        "data ood-demo --out results-shift-demo/sklearn-photos",
        f"data shift {DATA} --jobs 2",
        f"run --method sl1h,2hml,4hml {DATA} --seeds 2 --profile demo --eval shift "
        "--eval ood:results-shift-demo/sklearn-photos --jobs 2 --results results-shift-demo "
        "--no-progress",
        "report --results results-shift-demo --out reports/shift-demo --shift --ood",
    ]
    assert re.search(r"^shift and OOD demo: \d+ s \(report: reports/shift-demo\)$",
                     done.stdout, re.M), done.stdout
    # RESULTS / REPORTS elsewhere: the shift demo's folders follow them
    done, calls = _quick(repo, RESULTS="/tmp/x/res/", REPORTS="/tmp/x/rep")
    assert calls[2] == "data ood-demo --out /tmp/x/res-shift-demo/sklearn-photos"
    assert calls[4].endswith("--results /tmp/x/res-shift-demo")
    assert calls[5] == "report --results /tmp/x/res-shift-demo --out /tmp/x/rep/shift-demo " \
                       "--shift --ood"


@pytest.mark.parametrize("fail, after", [
    ("run --method sl1h", ["report --results results-shift-demo"]),  # a failed run: still reported
    ("report --results results-shift-demo", []),
    ("data ood-demo", None),  # no OOD set or corrupted set: nothing further of the shift demo
    ("data shift", None),
])
def test_a_failing_shift_demo_step_is_the_exit_status(tmp_path, fail, after):
    repo = _stub_repo(tmp_path, fail)
    done, calls = _quick(repo)
    assert done.returncode == 3
    assert calls[1] == "report --results results --out reports"  # the main demo is unaffected
    i = next(k for k, c in enumerate(calls) if c.startswith(fail))
    if after is None:
        assert i == len(calls) - 1 and "shift and OOD demo:" not in done.stdout
    else:
        assert [c[:len(a)] for c, a in zip(calls[i + 1:], after)] == after
        assert len(calls) == i + 1 + len(after) and "shift and OOD demo:" in done.stdout


def test_a_failing_main_demo_still_runs_the_shift_demo(tmp_path):
    repo = _stub_repo(tmp_path, "run --grid grids/quick.toml")
    done, calls = _quick(repo)
    assert done.returncode == 3 and len(calls) == 6


def test_full_mode_runs_no_shift_demo(tmp_path):
    repo = _stub_repo(tmp_path)
    done = subprocess.run(["./run_all.sh"], cwd=repo, capture_output=True, text=True)
    calls = (repo / "calls.txt").read_text().splitlines()
    assert done.returncode == 0 and not any("shift" in c or "ood" in c for c in calls)
