"""The loop's validation hook (bench.train.adapt) for the adaptive losses
(AdaFocal, CALS): their state moves after every epoch from the validation
split's logits, in place (what a captured CUDA graph needs), the graph-safe
step stays bit for bit the per-step path, a fused group keeps one state per
member, and a run killed after a cycle resumes bit for bit, adaptive state
included (and would not without it)."""
import dataclasses

import numpy as np
import pytest
import torch

from bench.core import store
from bench.core.config import PROFILES
from bench.methods import create_method
from bench.methods.adaptive import AdaptiveMethod
from bench.train import adapt
from bench.train.backbones import build_model
from bench.train.experiment import make_experiment, run_seed
from bench.train.fused import train_fused
from bench.train.loop import predict_logits, train

pytestmark = pytest.mark.usefixtures("one_thread")
NAMES = ["adafocal", "cals"]


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1, **kw})


def _model(data, seed):
    torch.manual_seed(seed)
    return build_model("smallcnn", data.image_size, 1, data.num_classes)[0]


def _run(data, name, **kw):
    m = create_method(name)
    m.setup(data.num_classes, 0)
    return train(_model(data, 0), m, _cfg(**kw), data, 0, progress=False), m


@pytest.mark.parametrize("name", NAMES)
def test_state_moves_each_epoch_in_place_from_the_validation_logits(tiny, name, monkeypatch):
    calls, real = [], AdaptiveMethod.on_validation

    def spy(self, logits, labels, epoch):
        calls.append((epoch, {k: v.data_ptr() for k, v in self.state.items()},
                      np.array(logits), np.array(labels)))
        real(self, logits, labels, epoch)
    monkeypatch.setattr(AdaptiveMethod, "on_validation", spy)
    result, m = _run(tiny, name, cycles=1, epochs_per_cycle=2, graph="true")
    assert [c[0] for c in calls] == [0, 1]  # after every epoch, counted over the run
    assert calls[0][1] == calls[1][1] == {k: v.data_ptr() for k, v in m.state.items()}
    np.testing.assert_array_equal(calls[1][3], tiny.val.labels)
    # the second epoch's logits are the selected checkpoint's validation logits (1 cycle)
    np.testing.assert_array_equal(calls[1][2], result.val_logits)
    fresh = create_method(name)
    fresh.start(tiny.num_classes, "cpu")
    moved = [not np.array_equal(a, b) for a, b in
             zip(m.host_state().values(), fresh.host_state().values())]
    assert any(moved)  # AdaFocal: its gammas; CALS: at least its mean constraints


@pytest.mark.parametrize("name", NAMES)
def test_graph_step_is_the_per_step_path(tiny, name):
    (a, ma), (b, mb) = _run(tiny, name, graph="true"), _run(tiny, name, graph="false")
    np.testing.assert_array_equal(a.test_logits, b.test_logits)
    for k, v in ma.state.items():
        assert torch.equal(v, mb.state[k]), k


def test_fused_members_keep_their_own_state(tiny):
    names = ["adafocal", "sl1h", "cals", "adafocal"]
    methods = [create_method(n) for n in names]
    for s, m in enumerate(methods):
        m.setup(tiny.num_classes, s)
    train_fused([_model(tiny, s) for s in range(4)], methods, _cfg(), tiny, list(range(4)),
                progress=False)
    alone, m0 = _run(tiny, "adafocal")
    np.testing.assert_allclose(methods[0].host_state()["gamma"], m0.host_state()["gamma"],
                               rtol=1e-5)
    assert not np.array_equal(methods[0].host_state()["gamma"], methods[3].host_state()["gamma"])
    assert adapt.adaptive(type("S", (), {"methods": methods})()) == [
        (0, methods[0]), (2, methods[2]), (3, methods[3])]


class Killed(Exception):
    pass


def _kill_at(at):
    def on_step(step, loss):
        if step == at:
            raise Killed
    return on_step


def _resumed_equals_whole(data, tmp, name) -> bool:
    cfg = dataclasses.replace(_cfg(), cycles=3)
    exp = make_experiment(data, "smallcnn", create_method(name), cfg)
    per_cycle = len(data.train) // cfg.batch_size
    _, whole = run_seed(exp, data, create_method(name), 0, tmp / "whole", progress=False)
    with pytest.raises(Killed):
        run_seed(exp, data, create_method(name), 0, tmp / "cut", progress=False,
                 on_step=_kill_at(per_cycle + 2))
    _, resumed = run_seed(exp, data, create_method(name), 0, tmp / "cut", progress=False)
    a, b = store.load_predictions(whole), store.load_predictions(resumed)
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_killed_run_resumes_bit_for_bit_with_its_adaptive_state(tiny, tmp_path, monkeypatch):
    assert _resumed_equals_whole(tiny, tmp_path / "a", "adafocal")
    # without the saved state restored the rerun starts cycle 2 from the initial gammas
    monkeypatch.setattr(adapt, "restore", lambda stepper, state: None)
    assert not _resumed_equals_whole(tiny, tmp_path / "b", "adafocal")


def test_a_plain_method_saves_no_adaptive_state_and_predicts_once_a_cycle(tiny, monkeypatch):
    counts = []
    monkeypatch.setattr("bench.train.loop.predict_logits",
                        lambda *a, **k: counts.append(1) or predict_logits(*a, **k))
    m = create_method("sl1h")
    train(_model(tiny, 0), m, _cfg(epochs_per_cycle=2), tiny, 0, progress=False)
    assert len(counts) == 2 + 1  # two cycle ends and the test set: no per-epoch pass
    assert adapt.saved(type("S", (), {"methods": [m]})()) == {}
