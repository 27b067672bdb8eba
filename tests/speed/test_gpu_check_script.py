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

REPO = Path(__file__).resolve().parents[2]
STEPS = ["syncs", "gpuplan", "e2e", "report", "deterministic=off", "deterministic=on",
         "sidebyside", "perf fp32", "perf bf16"]
TINY = {  # docs/speed.md's CPU dry run, smaller still: ~1.5 min on 2 cores
    "DEVICE": "cpu", "GPLAN_BUDGET": "10", "PERF_STEPS": "2", "PERF_REPEATS": "1",
    "E2E_LIMIT": "240", "REPORT_LIMIT": "120", "PERF_LIMIT": "120", "DET_LIMIT": "120",
    "SYNC_LIMIT": "120", "SBS_LIMIT": "120",
    "SYNC_ARGS": "--backbone smallcnn --size 16 --methods sl1h,4hml",
    "E2E_ARGS": "--backbone smallcnn --set image_size=12 --method sl1h,2hml",
    "SBS_ARGS": "--backbone smallcnn --image-size 16 --members 2 --steps 2 --warmup 1 "
                "--processes 1,2",
    "GPLAN_ARGS": "--backbones smallcnn --datasets pathmnist --seeds 2 --steps 1 --warmup 1 "
                  "--eval-images 16 --threads 1 --strategies single",
    "PERF_ARGS": "--backbone smallcnn --eval-images 32 --fused-seeds 2 --threads 1 "
                 "--ref-workers 0",
    "DET_ARGS": "--backbones smallcnn --image-size 32 --steps 1 --warmup 1 --eval-images 16 "
                "--threads 1",
}


LIMITS = ("SYNC_LIMIT", "E2E_LIMIT", "REPORT_LIMIT", "SBS_LIMIT", "PERF_LIMIT", "PERF_LIMIT",
          "DET_LIMIT", "DET_LIMIT")  # each step's hard limit (perf and det run twice)
SLACK = 45 + 40  # the script's own: gpuplan's beyond its budget, sidebyside's wait


def limit_scale() -> int:
    """How many times the TINY limits: 2 x (1 + runnable jobs per core now), at
    least 3; BENCH_TEST_LIMIT_SCALE overrides it."""
    if os.environ.get("BENCH_TEST_LIMIT_SCALE"):
        return int(os.environ["BENCH_TEST_LIMIT_SCALE"])
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    return max(3, math.ceil(2 * (1 + busy)))


def test_limit_scale_multiplies_the_hard_limits(tmp_path):
    """Only the `extra` step, a shell echo: its limit is printed scaled; a
    LIMIT_SCALE that is not a whole number stops the script before it starts."""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable,
           "STEPS": "extra", "EXTRA_CMD": "echo extra ran", "EXTRA_LIMIT": "30",
           "LIMIT_SCALE": "4"}
    script = str(REPO / "benchmarks" / "gpu_check.sh")
    done = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "== extra: echo extra ran (limit 120s)" in done.stdout
    assert "extra ran\nextra exit: 0" in done.stdout
    bad = subprocess.run(["bash", script], env={**env, "LIMIT_SCALE": "1.5"},
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "gpu_check.sh: LIMIT_SCALE must be a whole number >= 1, got '1.5'\n"
    assert not (tmp_path / "out" / "gpu_check.partial.tgz").exists()


def test_every_step_runs_and_one_tarball_comes_back(tmp_path):
    out = tmp_path / "out"
    scale = limit_scale()
    env = {**os.environ, **TINY, "OUT": str(out), "PYTHON": sys.executable,
           "LIMIT_SCALE": str(scale)}
    most = scale * (sum(int(TINY[k]) for k in LIMITS) + int(TINY["GPLAN_BUDGET"]) + SLACK + 120)
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=most)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.tar.gz"]
    with tarfile.open(out / "gpu_check.tar.gz") as tar:
        tar.extractall(tmp_path / "back", filter="data")
    back = tmp_path / "back" / "gpu_check"
    console = (back / "console.log").read_text()
    assert re.findall(r"^(.+) exit: (\d+)$", console, re.M) == [(s, "0") for s in STEPS]
    assert "2 runs in both, 0 in one only" in (back / "e2e.log").read_text()
    assert (back / "e2e" / "report" / "report.md").is_file()
    assert "torch" in (back / "env.txt").read_text()
    for name in ("gpuplan.json", "sidebyside.json", "det_off.json", "det_on.json"):
        assert (back / name).stat().st_size > 0, name
    assert not list(back.rglob("predictions.npz"))  # kept small for the trip back
