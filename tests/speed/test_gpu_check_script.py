"""benchmarks/gpu_check.sh, the GPU session's one prepared command, end to end
on the CPU with tiny settings: every step must still start and finish as the
code under it changes (a renamed flag, a moved module), and everything must
come back as the one tarball the device tool can return."""
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


def test_every_step_runs_and_one_tarball_comes_back(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, **TINY, "OUT": str(out), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=900)
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
