"""./run_all.sh (the whole paper) picks its strategy by the device and says so
first: on a GPU every dataset fused by method (every step captured, graph=auto;
the members on CUDA streams, fuse_as=auto), as many runs a group as free
GPU memory holds (no --fuse-max: the sweep chooses); on a CPU no fusing. Stub bench and
python, as tests/sweep/test_run_all_shift_demo.py."""
import subprocess

import pytest

from tests.sweep.test_run_all_shift_demo import _stub_repo


@pytest.mark.parametrize("cuda", [True, False])
def test_full_mode_strategy_by_device(tmp_path, cuda):
    repo = _stub_repo(tmp_path)
    python = repo / ".venv" / "bin" / "python"  # stands in for `torch.cuda.is_available()`
    python.write_text(f"#!/bin/sh\nexit {0 if cuda else 1}\n")
    python.chmod(0o755)
    done = subprocess.run(["./run_all.sh", "--no-progress"], cwd=repo, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("run_all.sh: GPU: " if cuda else "run_all.sh: no GPU: ")
    calls = (repo / "calls.txt").read_text().splitlines()
    runs = {c.split("paper.toml:")[1].split()[0]: c for c in calls if c.startswith("run ")}
    assert sorted(runs) == ["chaoyang", "kvasir", "pathmnist"]
    assert all(("--fuse methods" in c) is cuda for c in runs.values())
    assert not any("--fuse-max" in c for c in runs.values())
    assert cuda or not any("--fuse" in c for c in runs.values())
    assert all(c.endswith("--no-progress") for c in runs.values())  # the user's flags last


def test_the_released_precision_unless_asked(tmp_path):
    """./run_all.sh keeps PyTorch's default precision (no --set precision) and
    passes --precision P to every run as --set precision=P."""
    repo = _stub_repo(tmp_path)
    python = repo / ".venv" / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    for extra, want in (([], None), (["--precision", "tf32"], "--set precision=tf32")):
        (repo / "calls.txt").unlink(missing_ok=True)
        done = subprocess.run(["./run_all.sh", *extra], cwd=repo, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        runs = [c for c in (repo / "calls.txt").read_text().splitlines() if c.startswith("run ")]
        assert len(runs) == 3
        assert all((want in c) if want else ("precision" not in c) for c in runs)
