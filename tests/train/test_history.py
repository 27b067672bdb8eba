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
