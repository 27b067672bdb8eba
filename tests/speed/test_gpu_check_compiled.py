"""benchmarks/gpu_check.sh's `compiled` step and the issue-47 preset, without
a GPU: the flags the step passes are accepted by the entry points it calls,
and the preset's hard limits fit the 7 GPU-minutes of one call."""
import re
import subprocess
from pathlib import Path

from bench.speed import capture as C
from bench.speed import graphtime as G

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"


def _step(text: str) -> str:
    return text[text.index("step_compiled() {"):text.index("step_extra() {")]


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


def test_the_compiled_steps_flags_are_accepted():
    body = _step(SCRIPT.read_text())
    cells = re.search(r"--cells (\S+)", body).group(1)
    assert G.parse_cells(cells) == ((28, 25), (28, 8), (28, 1))
    paths = re.findall(r"paths=(\S+)", body)  # CUDA's, then a CPU dry run's
    assert [G.parse_paths(p) for p in paths] == [("captured", "compiled-captured"),
                                                 ("graph-safe", "compiled")]
    s = G.parse_args(["--device", "cuda", "--cells", cells, "--streams", "1", "--paths",
                      paths[0], "--budget-s", "75", "--out", "x.json"])
    assert (s.streams, s.budget_s) == ("1", 75.0)
    cases = re.search(r'--cases "([^"]+)"', body).group(1)
    assert C.choose(C.parse_args(["--device", "cuda", "--no-explain", "--cases", cases])) == \
        list(C.compiled_cases())
    # x8 and x25 are groups of the paper's one-head methods, x1 one run
    assert G.members_of(8) == G.ONE_HEAD_GROUP[:8] and len(set(G.members_of(25))) == 5


def test_the_issue47_preset_fits_seven_minutes():
    text = SCRIPT.read_text()
    preset = text[text.index('if [ "${STEPS:-}" = issue47 ]'):text.index("LIMIT_SCALE=")]
    limits = {k: int(v) for k, v in re.findall(r'"\$\{(\w+_LIMIT):=(\d+)\}"', preset)}
    steps = re.search(r'STEPS="([^"]+)"', preset).group(1).split()
    assert steps == ["staging", "compiled", "precision", "streams", "slice"]
    total = (3 * limits["STAGE_LIMIT"] + limits["COMPILED_LIMIT"] + limits["PREC_LIMIT"]
             + limits["STREAMS_LIMIT"] + limits["SLICE_LIMIT"])  # staging runs 3 commands
    assert total + 20 <= 420, total  # + the script's setup (imports, env.txt)
    assert f"= {total} s" in text  # the header's sum is this one
    budget = int(re.search(r'"\$\{COMPILED_BUDGET:=(\d+)\}"', preset).group(1))
    assert budget < limits["COMPILED_LIMIT"]
