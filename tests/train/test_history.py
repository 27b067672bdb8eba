"""The training history each record keeps: per epoch the mean training loss
and the learning rate, per cycle end the validation ACC / ECE / NLL / AUC,
checked against the step losses the loop hands its hook, the cosine formula
written out, and scikit-learn on the kept validation logits."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, log_loss

from bench.core.config import PROFILES
from bench.methods import create_method
from bench.train.backbones import build_model
from bench.core.schedule import steps_per_epoch
from bench.train.loop import train


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("method", ["sl1h", "2hml"])
def test_history_per_epoch_and_per_cycle(tiny, one_thread, method):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=2, batch_size=16,
                              lr=0.05, eta_min=0.001)
    m = create_method(method)
    m.setup(tiny.num_classes, 0)
    torch.manual_seed(0)
    model, _ = build_model("smallcnn", tiny.image_size, m.heads, tiny.num_classes)
    steps = []
    result = train(model, m, cfg, tiny, 0, progress=False,
                   on_step=lambda step, loss: steps.append(float(loss)))
    per_epoch = steps_per_epoch(len(tiny.train), cfg.batch_size, cfg.drop_last)
    period = per_epoch * cfg.epochs_per_cycle
    epochs = result.history["epochs"]
    assert [(e["cycle"], e["epoch"]) for e in epochs] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    for i, e in enumerate(epochs):
        assert e["train_loss"] == pytest.approx(np.mean(steps[i * per_epoch:(i + 1) * per_epoch]),
                                                rel=1e-5)
        t = ((i + 1) * per_epoch - 1) % period  # the epoch's last step
        lr = cfg.eta_min + (cfg.lr - cfg.eta_min) * (1 + math.cos(math.pi * t / period)) / 2
        assert e["lr"] == pytest.approx(lr, rel=1e-9)
    cycles = result.history["cycles"]
    assert [c["cycle"] for c in cycles] == [1, 2]
    assert [c["val_auc"] for c in cycles] == pytest.approx(result.cycle_val_auc)
    best = cycles[result.best_cycle - 1]  # the kept checkpoint: its logits are in the result
    probs = _softmax(result.val_logits).mean(axis=1)
    labels = tiny.val.labels
    assert best["val_acc"] == pytest.approx(accuracy_score(labels, probs.argmax(1)))
    assert best["val_nll"] == pytest.approx(
        log_loss(labels, probs, labels=range(tiny.num_classes)), rel=1e-6)
    assert 0.0 <= best["val_ece"] <= 1.0


def test_a_fused_group_keeps_each_members_own_history(tiny, one_thread):
    """Per-member step losses come as one vector per step; each member's epoch
    mean is its own column of them."""
    from bench.train.fused import train_fused

    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=2, batch_size=16)
    seeds = [0, 1]
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(build_model("smallcnn", tiny.image_size, 1, tiny.num_classes)[0])
    steps = []
    results = train_fused(models, [create_method("sl1h") for _ in seeds], cfg, tiny, seeds,
                          progress=False, on_step=lambda step, loss: steps.append(
                              loss.detach().reshape(-1).tolist()))
    per_epoch = steps_per_epoch(len(tiny.train), cfg.batch_size, cfg.drop_last)
    for s, result in enumerate(results):
        got = [e["train_loss"] for e in result.history["epochs"]]
        want = [np.mean([v[s] for v in steps[i * per_epoch:(i + 1) * per_epoch]])
                for i in range(cfg.epochs_per_cycle)]
        assert got == pytest.approx(want, rel=1e-5)
        assert [c["val_auc"] for c in result.history["cycles"]] == pytest.approx(
            result.cycle_val_auc)
    assert results[0].history["epochs"][0]["train_loss"] != pytest.approx(
        results[1].history["epochs"][0]["train_loss"])


@pytest.mark.parametrize("method, keys, sets", [
    ("adafocal", {"gamma", "edges"}, None),
    # a margin the tiny model's logits exceed, so the multipliers move off their floor
    ("cals", {"lambda", "rho", "c_prev", "has_prev"}, {"cals_margin": "0.05"})])
def test_an_adaptive_methods_state_is_in_each_epochs_history(tiny, one_thread, method, keys,
                                                             sets):
    """After each epoch's validation update the state the next epoch trains
    with (AdaFocal's gamma per bin, CALS's multipliers) is on that epoch's
    entry: compared with a copy taken as the method updates."""
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=2, batch_size=16)
    m = create_method(method, sets)
    m.setup(tiny.num_classes, 0)
    seen, update = [], m.on_validation

    def spy(*args):
        update(*args)
        seen.append({k: v.copy() for k, v in m.host_state().items()})  # CPU: views, so copies
    m.on_validation = spy
    torch.manual_seed(0)
    model, _ = build_model("smallcnn", tiny.image_size, m.heads, tiny.num_classes)
    epochs = train(model, m, cfg, tiny, 0, progress=False).history["epochs"]
    assert len(seen) == len(epochs) == 4
    first = m.initial_state(tiny.num_classes)
    for e, state in zip(epochs, seen):
        assert set(e["adaptive"]) == keys
        for k in keys:
            assert e["adaptive"][k] == state[k].tolist()
    moved = "gamma" if method == "adafocal" else "lambda"
    assert epochs[0]["adaptive"][moved] != first[moved].tolist()  # after the update, not before
    assert epochs[-1]["adaptive"][moved] != epochs[0]["adaptive"][moved]


def test_a_plain_methods_history_has_no_adaptive_state(tiny, one_thread):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1, batch_size=16)
    m = create_method("sl1h")
    model, _ = build_model("smallcnn", tiny.image_size, 1, tiny.num_classes)
    (epoch,) = train(model, m, cfg, tiny, 0, progress=False).history["epochs"]
    assert "adaptive" not in epoch
