"""A run killed after its first cycle resumes from its saved state and ends
with the record an uninterrupted run writes, bit for bit on CPU (timings aside);
single runs and fused groups alike (one training loop)."""
import dataclasses

import numpy as np
import pytest
import torch

from bench.core import store
from bench.core.config import PROFILES
from bench.methods import create_method
from bench.train.experiment import make_experiment, run_seed
from bench.train.groups import run_members

pytestmark = pytest.mark.usefixtures("one_thread")

TIMING = {"train_seconds", "train_images_per_s", "infer_ms_per_image"}


class Killed(Exception):
    """Stands in for SIGKILL / scancel / a time limit at a chosen step."""


def _cfg():
    # momentum: the optimiser has state to lose; augment (quick's default) and
    # mixup: every generator is drawn from; 3 cycles: the best checkpoint so
    # far must survive too.
    return dataclasses.replace(PROFILES["quick"], cycles=3, epochs_per_cycle=1, momentum=0.9)


def _per_cycle(bundle, cfg) -> int:
    return len(bundle.train) // cfg.batch_size  # 48 images, batch 8: no partial batch


def _killer(at: int, seen: list):
    def on_step(step, loss):
        seen.append(step)
        if step == at:
            raise Killed(f"killed at step {step}")
    return on_step


def _same_record(a, b) -> None:
    """Predictions equal exactly; metrics and config equal but for timings and provenance."""
    pa, pb = store.load_predictions(a), store.load_predictions(b)
    assert sorted(pa) == sorted(pb)
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k], err_msg=k)
    ma, mb = (store.read_json(p / "metrics.json") for p in (a, b))
    for m in (ma, mb):
        for k in TIMING | {"files", "digest"}:  # both cover the timings
            m.pop(k)
    assert ma == mb
    ca, cb = (store.read_json(p / "config.json") for p in (a, b))
    ca.pop("provenance"), cb.pop("provenance")
    assert ca == cb


def test_single_run_killed_after_first_cycle_resumes_bit_for_bit(tiny, tmp_path):
    cfg, method = _cfg(), "mixup"
    exp = make_experiment(tiny, "smallcnn", create_method(method), cfg)
    per_cycle = _per_cycle(tiny, exp.train)
    _, whole = run_seed(exp, tiny, create_method(method), 0, tmp_path / "whole", progress=False)

    seen: list = []
    with pytest.raises(Killed):  # killed two steps into the second cycle
        run_seed(exp, tiny, create_method(method), 0, tmp_path / "cut", progress=False,
                 on_step=_killer(per_cycle + 2, seen))
    record = exp.record_dir(tmp_path / "cut", 0)
    state = store.state_path(record)
    assert state.is_file() and not record.exists()
    # the state is beside the record, never one: check, report and dry-run see none
    assert store.iter_seed_dirs(tmp_path / "cut") == []
    assert store.iter_records(tmp_path / "cut") == []

    seen.clear()
    _, resumed = run_seed(exp, tiny, create_method(method), 0, tmp_path / "cut",
                          progress=False, on_step=_killer(-1, seen))
    assert seen[0] == per_cycle + 1  # the rerun started after the saved cycle end
    assert seen[-1] == 3 * per_cycle
    _same_record(resumed, whole)
    assert not state.exists()  # deleted once the record is complete
    assert [p.name for p in state.parent.iterdir()] == []  # no temporary left either


def test_state_of_another_config_or_damaged_is_ignored(tiny, tmp_path):
    """A state saved under another key (here: another lr, same record path
    forced) or a truncated file starts the run afresh instead of mixing runs."""
    exp = make_experiment(tiny, "smallcnn", create_method("sl1h"), _cfg())
    per_cycle = _per_cycle(tiny, exp.train)
    record = exp.record_dir(tmp_path, 0)
    state = store.state_path(record)
    state.parent.mkdir(parents=True)
    for damaged in (b"", b"not a torch file"):
        state.write_bytes(damaged)
        seen: list = []
        with pytest.raises(Killed):
            run_seed(exp, tiny, create_method("sl1h"), 0, tmp_path, progress=False,
                     on_step=_killer(per_cycle + 1, seen))
        assert seen[0] == 1
    other = make_experiment(tiny, "smallcnn", create_method("sl1h"),
                            dataclasses.replace(_cfg(), lr=0.02))
    # the other config's record lives elsewhere: point it at this state by hand;
    # it is set aside (kept), not mixed in
    from bench.train.resume import CycleState
    saved = state.read_bytes()
    assert CycleState(state, f"{other.chash}/seed0").load() is None
    (aside,) = [p for p in state.parent.glob(f"{state.name}.damaged-*")
                if p.read_bytes() == saved]
    assert not state.exists()
    aside.rename(state)
    assert CycleState(state, f"{exp.chash}/seed0").load()["loop"]["cycle"] == 1


MEMBERS = [("sl1h", 0), ("mixup", 0), ("mixup", 1)]


def test_fused_group_killed_after_first_cycle_resumes_bit_for_bit(tiny, tmp_path):
    cfg = _cfg()
    exps = {n: make_experiment(tiny, "smallcnn", create_method(n), cfg) for n, _ in MEMBERS}

    def members():
        return [(exps[n], create_method(n), s) for n, s in MEMBERS]

    whole = run_members(members(), tiny, tmp_path / "whole", progress=False)
    per_cycle = _per_cycle(tiny, cfg)
    seen: list = []
    with pytest.raises(Killed):
        run_members(members(), tiny, tmp_path / "cut", progress=False,
                    on_step=_killer(per_cycle + 1, seen))
    first = exps["sl1h"].record_dir(tmp_path / "cut", 0)
    states = list((first.parent / "_sweep").glob("seed0.group-*.state.safetensors"))
    assert len(states) == 1 and store.iter_seed_dirs(tmp_path / "cut") == []

    seen.clear()
    resumed = run_members(members(), tiny, tmp_path / "cut", progress=False,
                          on_step=_killer(-1, seen))
    assert seen[0] == per_cycle + 1
    for (_, a), (_, b) in zip(resumed, whole):
        _same_record(a, b)
    assert not states[0].exists()
    # the members differ, so the equalities above compare real training
    logits = [store.load_predictions(p)["test_logits"] for _, p in whole]
    assert not np.array_equal(logits[1], logits[2])


def test_rng_state_covers_every_process_generator():
    import random

    from bench.train.resume import rng_state, set_rng_state

    saved = rng_state()
    drawn = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(saved)
    again = (torch.rand(3), np.random.rand(3), random.random())
    torch.testing.assert_close(drawn[0], again[0], rtol=0, atol=0)
    np.testing.assert_array_equal(drawn[1], again[1])
    assert drawn[2] == again[2]
