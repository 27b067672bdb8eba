"""python -m bench.speed.staging (old per-step derivation vs the per-epoch one,
bit-equal) and the gpu_check.sh step that runs it: its commands' flags are
ones the tools accept (the script's CPU dry run leaves this step out)."""
import importlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from bench.speed import staging

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_tool_times_both_paths_and_finds_them_equal(capsys):
    assert staging.main(["--images", "203", "--size", "12", "--method", "mixup",
                         "--members", "2"]) == 0
    out = capsys.readouterr().out
    assert "203 images of 12 px, 26 steps" in out  # 25 of 8 and a ragged one of 3
    assert re.search(r"ratio old/new: [\d.]+x; staged bits equal: True", out)


def test_a_bad_value_is_one_line_and_status_2(capsys):
    with pytest.raises(SystemExit) as stop:
        staging.main(["--images", "0"])
    assert stop.value.code == 2 and "--images" in capsys.readouterr().err


def test_the_gpu_checks_staging_step_passes_flags_the_tools_accept(tmp_path):
    script = (REPO / "benchmarks" / "gpu_check.sh").read_text()
    body = re.search(r"^step_staging\(\) \{\n.*?^\}\n", script, re.M | re.S).group(0)
    stub = tmp_path / "py"  # stands in for Python: writes down how it was called
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$*" >> "$CALLS"\n')
    stub.chmod(0o755)
    env = {**os.environ, "PY": str(stub), "DEVICE": "cuda", "OUT_DIR": str(tmp_path),
           "STAGE_LIMIT": "20", "STAGE_ARGS": "", "STAGE_STIME_ARGS": "",
           "CALLS": str(tmp_path / "calls")}
    done = subprocess.run(["bash", "-c", body + "step_staging"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[1] for c in calls] == ["bench.speed.staging"] + ["bench.speed.streamtime"] * 2
    for call in calls:
        _, module, *argv = call.split()
        args = importlib.import_module(module).parse_args(argv)
        assert args.device == "cuda"
    assert [c.split("--stage-ahead ")[1].split()[0] for c in calls[1:]] == ["false", "true"]
