"""Issue 35, points 1 and 2: a resume state is data only, and the run's log
tells the truth about it.

A planted pickle (one that creates a file when unpickled) put where a run
keeps its state is refused, set aside as a damaged state, and never executes;
a state cut short after a kill -9 is named as damaged in the run's log and set
aside, and the log says "resuming" only when the run did resume."""
from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
import torch

from bench.core import store
from bench.methods import create_method
from bench.sweep import runstate, worker
from bench.sweep.grid import experiment_for
from bench.train.experiment import run_seed
from sweeputil import run_args, specs_for

pytestmark = pytest.mark.usefixtures("one_thread")

TWO_CYCLES = ["--seeds", "1", "--set", "cycles=2"]  # a state is saved after cycle 1


class Plant:
    """Unpickling this creates `marker`: what an attacker's file would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def planted_pickles(marker) -> dict[str, bytes]:
    """The two pickle formats a .pt file may have: plain, and torch.save's zip."""
    zipped = io.BytesIO()
    torch.save({"loop": Plant(marker)}, zipped)
    return {"pickle": pickle.dumps(Plant(marker)), "torch.save": zipped.getvalue()}


def test_planted_pickle_really_would_create_the_file(tmp_path):
    """The test's own check: loading the plant the unsafe way does create the marker."""
    marker = tmp_path / "ran"
    pickle.loads(planted_pickles(marker)["pickle"])
    assert marker.exists()


class Killed(Exception):
    pass


def _killed_after_first_cycle(results):
    """A run of the sweep's grid stopped two steps into its second cycle, so its
    state (saved at the end of cycle 1) is on disk; -> (spec, state path)."""
    (spec,) = specs_for(run_args(results, *TWO_CYCLES))
    method = create_method(spec.method)
    exp, bundle = experiment_for(spec, method)
    per_cycle = exp.train.epochs_per_cycle * (len(bundle.train) // exp.train.batch_size)

    def kill(step, loss):
        if step == per_cycle + 2:
            raise Killed

    with pytest.raises(Killed):
        run_seed(exp, bundle, method, spec.seed, spec.results, progress=False, on_step=kill)
    state = store.state_path(spec.record)
    assert state.is_file() and not spec.record.exists()
    return spec, state


def _log(spec) -> str:
    return runstate.log_path(spec.record).read_text()


@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_point1_planted_pickle_as_resume_state_is_refused_and_runs_no_code(tmp_path, kind):
    (spec,) = specs_for(run_args(tmp_path / "results", *TWO_CYCLES))
    marker = tmp_path / "planted-code-ran"
    state = store.state_path(spec.record)
    state.parent.mkdir(parents=True)
    state.write_bytes(planted_pickles(marker)[kind])
    out = worker.execute(spec)
    assert out["status"] == "done", out
    assert not marker.exists()  # the pickle was never unpickled
    (line,) = [t for t in _log(spec).splitlines() if "resume state" in t]
    assert "resume state damaged (no state header), set aside as " in line
    assert line.endswith("; training from step 0")
    (aside,) = state.parent.glob(f"{state.name}.damaged-*")
    assert aside.read_bytes() == planted_pickles(marker)[kind]  # kept, as it was
    assert "resuming" not in _log(spec)


def test_point2_state_cut_after_kill_9_is_named_set_aside_and_never_resumed(tmp_path):
    spec, state = _killed_after_first_cycle(tmp_path)
    whole = state.read_bytes()
    state.write_bytes(whole[:1000])  # what a kill -9 during a copy could leave
    from bench.sweep.grid import run_status  # the dry run's view: no claim to resume either

    status, detail = run_status(spec)
    assert status == "missing" and detail.startswith(
        "its resume state is damaged (truncated: 1000 bytes, the header alone needs ")
    assert detail.endswith("): a real run sets it aside, trains from step 0")
    out = worker.execute(spec)
    assert out["status"] == "done", out
    log = _log(spec)
    assert "resuming" not in log
    (line,) = [t for t in log.splitlines() if "resume state" in t]
    assert "resume state damaged (truncated: 1000 bytes, the header alone needs" in line
    assert line.endswith("; training from step 0")
    (aside,) = state.parent.glob(f"{state.name}.damaged-*")
    assert aside.read_bytes() == whole[:1000] and not state.exists()


def test_point2_a_whole_state_is_resumed_and_the_log_says_from_where(tmp_path):
    spec, state = _killed_after_first_cycle(tmp_path)
    out = worker.execute(spec)
    assert out["status"] == "done", out
    (line,) = [t for t in _log(spec).splitlines() if "resum" in t]
    assert "resuming from the state saved at the end of cycle 1 (step " in line
    assert not state.exists() and not list(state.parent.glob("*.damaged-*"))


def test_point2_an_altered_state_is_damaged_not_half_read(tmp_path):
    """A byte changed inside the tensors (same length): the digest tells."""
    from bench.core import statefile

    spec, state = _killed_after_first_cycle(tmp_path)
    data = bytearray(state.read_bytes())
    data[-5] ^= 0xFF
    with pytest.raises(statefile.Damaged, match="digest mismatch"):
        statefile.loads(bytes(data))


def test_point1_state_file_is_what_the_safetensors_package_reads(tmp_path):
    """An independent reader: the safetensors package sees the same tensors and
    our metadata; our reader gives back every type a state holds."""
    from safetensors.torch import load as st_load

    from bench.core import statefile

    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "e": torch.zeros(0),
             "b": torch.tensor([True, False]), "h": torch.ones(2, dtype=torch.bfloat16),
             "opt": {0: {"momentum_buffer": torch.ones(3)}}, "rng": np.random.get_state(),
             "best": [(-float("inf"), None), (0.5, (2, np.float64(0.25)))], "n": float("nan")}
    data = bytes(statefile.dumps(state))
    tensors = st_load(data)
    assert any(torch.equal(t, state["w"]) for t in tensors.values())
    back = statefile.loads(data)
    assert torch.equal(back["w"], state["w"]) and back["e"].shape == (0,)
    assert back["b"].dtype == torch.bool and back["h"].dtype == torch.bfloat16
    assert list(back["opt"]) == [0] and torch.equal(back["opt"][0]["momentum_buffer"], torch.ones(3))
    assert back["rng"][0] == "MT19937" and isinstance(back["rng"], tuple)
    np.testing.assert_array_equal(back["rng"][1], state["rng"][1])
    assert back["best"][1] == (0.5, (2, 0.25)) and type(back["best"][1][1][1]) is np.float64
    assert back["best"][0] == (-float("inf"), None) and back["n"] != back["n"]
    with pytest.raises(TypeError, match="cannot be stored"):
        statefile.dumps({"x": Plant("never")})
