"""benchmarks/gpu_check.sh, the GPU session's one prepared command, end to end
on the CPU with tiny settings: every step must still start and finish as the
code under it changes (a renamed flag, a moved module), and everything must
come back as the one tarball the device tool can return.

The script's hard limits guard against hangs; they say nothing about speed.
So the test never assumes one: it scales every limit (the script's
LIMIT_SCALE) by how busy the machine is when it starts, at least 3x, and
waits for the script as long as those limits add up to (issue 35: beside two
CPU-bound jobs on 2 cores the e2e step once ran past a fixed 240 s)."""
import math
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_STEPS = "capture staging streamtime graphtime gpuplan e2e"  # the script's STEPS default
ALL_STEPS = "capture streamtime graphtime syncs gpuplan e2e det sidebyside perf"  # the dry run: every one
STEPS = ["capture", "streamtime", "graphtime", "syncs", "gpuplan", "e2e", "report", "deterministic=off",
         "deterministic=on", "sidebyside", "perf fp32", "perf bf16", "extra"]
TINY = {  # docs/speed.md's CPU dry run, smaller still: ~1 min on 2 cores
    "DEVICE": "cpu", "GPLAN_BUDGET": "10", "PERF_STEPS": "2", "PERF_REPEATS": "1",
    "E2E_LIMIT": "240", "REPORT_LIMIT": "120", "PERF_LIMIT": "120", "DET_LIMIT": "120",
    "SYNC_LIMIT": "120", "SBS_LIMIT": "120", "CAPTURE_LIMIT": "240", "GTIME_BUDGET": "20",
    # two cases, both commands (the GPU run's second is ResNet50; here smallcnn again)
    "CAPTURE_ARGS": "--steps 2 --size 16 --backbone smallcnn --cases sl1h,mixup",
    "GTIME_ARGS": "--backbone smallcnn --cells 16:1 --streams 1 --steps 1",
    # both commands at 16 px, 2 members as streams only, the fewest steps it allows
    "STIME_ARGS": "--backbone smallcnn --size 16 --members 2 --fuse-as streams --steps 11",
    "STIME_LIMIT": "240",
    "SYNC_ARGS": "--backbone smallcnn --size 16 --methods sl1h,4hml",
    # 16 steps a run (1,077 images, batch 64, one epoch), not 268: the step proves
    # both sweeps, the comparison and the report run, not what they measure
    "E2E_ARGS": "--backbone smallcnn --set image_size=12 --method sl1h,2hml "
                "--set epochs_per_cycle=1 --set batch_size=64",
    # K=2 alone: two processes at once, the path K=1 takes too (one process fewer to start)
    "SBS_ARGS": "--backbone smallcnn --image-size 16 --members 2 --steps 2 --warmup 1 "
                "--processes 2",
    "GPLAN_ARGS": "--backbones smallcnn --datasets pathmnist --seeds 2 --steps 1 --warmup 1 "
                  "--eval-images 16 --threads 1 --strategies single",
    "PERF_ARGS": "--backbone smallcnn --eval-images 32 --fused-seeds 2 --threads 1 "
                 "--ref-workers 0",
    "DET_ARGS": "--backbones smallcnn --image-size 32 --steps 1 --warmup 1 --eval-images 16 "
                "--threads 1",
}


# the `extra` step, a shell echo, rides along (each start of the script costs
# seconds of torch imports): its limit must come out multiplied by LIMIT_SCALE
EXTRA = {"EXTRA_CMD": "echo extra ran", "EXTRA_LIMIT": "30"}
LIMITS = ("CAPTURE_LIMIT", "STIME_LIMIT", "SYNC_LIMIT", "E2E_LIMIT", "REPORT_LIMIT", "SBS_LIMIT", "PERF_LIMIT", "PERF_LIMIT",
          "DET_LIMIT", "DET_LIMIT")  # each step's hard limit (perf and det run twice)
SLACK = 45 + 40 + 20 + 45  # the script's own: gpuplan's beyond its budget, sidebyside's
# wait, graphtime's budget and its slack


def limit_scale() -> int:
    """How many times the TINY limits: 2 x (1 + runnable jobs per core now), at
    least 3; BENCH_TEST_LIMIT_SCALE overrides it."""
    if os.environ.get("BENCH_TEST_LIMIT_SCALE"):
        return int(os.environ["BENCH_TEST_LIMIT_SCALE"])
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    return max(3, math.ceil(2 * (1 + busy)))


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The whole script once on the CPU, every default step and then `extra`:
    -> (folder, LIMIT_SCALE, the finished process)."""
    tmp = tmp_path_factory.mktemp("gpu_check")
    scale = limit_scale()
    env = {**os.environ, **TINY, **EXTRA, "OUT": str(tmp / "out"), "PYTHON": sys.executable,
           "LIMIT_SCALE": str(scale), "STEPS": f"{ALL_STEPS} extra"}
    most = scale * (sum(int(TINY[k]) for k in LIMITS) + int(TINY["GPLAN_BUDGET"]) + SLACK
                    + int(EXTRA["EXTRA_LIMIT"]) + 120)
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=most)
    return tmp, scale, done


def test_limit_scale_multiplies_the_hard_limits(dry_run, tmp_path):
    """The `extra` step, a shell echo: its limit is printed scaled; a
    LIMIT_SCALE that is not a whole number stops the script before it starts."""
    _, scale, done = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"== extra: echo extra ran (limit {30 * scale}s)" in done.stdout
    assert "extra ran\nextra exit: 0" in done.stdout
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable,
           "STEPS": "extra", **EXTRA, "LIMIT_SCALE": "1.5"}
    script = str(REPO / "benchmarks" / "gpu_check.sh")
    bad = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "gpu_check.sh: LIMIT_SCALE must be a whole number >= 1, got '1.5'\n"
    assert not (tmp_path / "out" / "gpu_check.partial.tgz").exists()


def test_every_step_runs_and_one_tarball_comes_back(dry_run):
    tmp, _, done = dry_run
    out = tmp / "out"
    # the steps run are the script's default ones (plus `extra`, above)
    script = (REPO / "benchmarks" / "gpu_check.sh").read_text()
    assert f'STEPS="${{STEPS:-{DEFAULT_STEPS}}}"' in script
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.tar.gz"]
    with tarfile.open(out / "gpu_check.tar.gz") as tar:
        tar.extractall(tmp / "back", filter="data")
    back = tmp / "back" / "gpu_check"
    console = (back / "console.log").read_text()
    assert re.findall(r"^(.+) exit: (\d+)$", console, re.M) == [(s, "0") for s in STEPS]
    assert "2 runs in both, 0 in one only" in (back / "e2e.log").read_text()
    assert (back / "e2e" / "report" / "report.md").is_file()
    assert "torch" in (back / "env.txt").read_text()
    assert "2 of 2 cases capturable and bit-equal" in (back / "capture.log").read_text()
    for name in ("gpuplan.json", "sidebyside.json", "det_off.json", "det_on.json",
                 "graphtime.json"):
        assert (back / name).stat().st_size > 0, name
    assert not list(back.rglob("predictions.npz"))  # kept small for the trip back
