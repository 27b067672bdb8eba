"""MIMO (Havasi et al. 2021; issue 49, point 2): the authors' input pairing
(uncertainty-baselines baselines/cifar/mimo.py) as a staged draw, the
channel-wise inputs and the summed loss against hand computations, the
widened stem, test-time tiling and averaging, the members stored as the
record's heads after a tiny run through the normal path, the graph-safe
step bit for bit, and the one-line refusal of a backbone without a stem."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn

from bench.calib.metrics import head_probs
from bench.cli.main import main
from bench.core.config import PROFILES, TrainConfig
from bench.core.paper import METHOD_SOURCES
from bench.methods import RECENT, create_method, training_methods
from bench.train.backbones import build_model, model_arch
from bench.train.ensembles import widen_stem
from bench.train.loop import normalise, predict_logits, train

pytestmark = pytest.mark.usefixtures("one_thread")


def test_defaults_group_and_source():
    m = create_method("mimo")
    p = m.params
    assert (p.mimo_members, p.mimo_rho, p.mimo_batch_reps, p.mimo_loss) == (3, 0.0, 4, "sum")
    assert (m.heads, m.arch, m.batch_multiple, m.table_section()) == (3, ("mimo", 3), 4,
                                                                      "multi-head")
    assert "mimo" in RECENT and "mimo" not in training_methods()
    assert "Havasi" in METHOD_SOURCES["mimo"] and m.display() == "MIMO"


@pytest.mark.parametrize("n, reps, rho, distinct", [(5, 2, 0.4, 6), (4, 4, 0.0, 16),
                                                    (6, 1, 1.0, 0), (3, 3, 0.5, 4)])
def test_the_pairing_is_the_authors(n, reps, rho, distinct):
    """Every member sees each image R times a step; the last rows - floor(rows
    (1 - rho)) rows hold one image in every slot; the first rows are each
    member's own shuffle of the same multiset."""
    m = create_method("mimo", {"mimo_batch_reps": str(reps), "mimo_rho": str(rho)})
    before = torch.get_rng_state()
    slots = m.draw(n, torch.Generator().manual_seed(3))["slots"]
    assert torch.equal(torch.get_rng_state(), before)  # the method generator only
    assert torch.equal(slots, m.draw(n, torch.Generator().manual_seed(3))["slots"])
    assert slots.shape == (3, n * reps)
    for row in slots:
        assert sorted(row.tolist()) == sorted(list(range(n)) * reps)
    assert (slots[:, distinct:] == slots[0, distinct:]).all()
    heads = [sorted(row[:distinct].tolist()) for row in slots]
    assert heads[0] == heads[1] == heads[2]
    if distinct == n * reps:  # rho 0: the members' orders differ (a fixed draw)
        assert not torch.equal(slots[0], slots[1])


def test_inputs_targets_and_loss_by_hand():
    m = create_method("mimo", {"mimo_members": "2"})
    x = torch.arange(4 * 3 * 2 * 2, dtype=torch.float64).view(4, 3, 2, 2)
    y = torch.tensor([7, 8, 9, 6])
    slots = torch.tensor([[0, 3, 2], [1, 3, 0]])  # member 0's images, member 1's
    inputs, target = m.staged_batch(x, y, {"slots": slots})
    assert inputs.shape == (3, 6, 2, 2)
    for r in range(3):
        for member in range(2):
            for c in range(3):
                assert torch.equal(inputs[r, member * 3 + c], x[slots[member, r], c])
    assert target.tolist() == [[7, 8], [6, 6], [9, 7]]
    # two rows, two heads, two classes: softmax probabilities 3/4, 1/2, 2/3, 1/2 of the targets
    z = torch.tensor([[[0.0, math.log(3)], [0.0, 0.0]], [[math.log(2), 0.0], [0.0, 0.0]]],
                     dtype=torch.float64)
    t = torch.tensor([[1, 0], [0, 1]])
    want = -(math.log(3 / 4) + math.log(1 / 2) + math.log(2 / 3) + math.log(1 / 2)) / 2
    assert m.loss(z, t).item() == pytest.approx(want, rel=1e-12)
    mean = create_method("mimo", {"mimo_loss": "mean"}).loss(z, t).item()
    assert mean == pytest.approx(want / 2, rel=1e-12)


def test_widened_stem():
    """Pretrained: M copies of an image give the stem's own output; random:
    He-normal over the widened fan-in."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, bias=True)
    net = nn.Sequential(conv)
    x = torch.randn(2, 3, 6, 6)
    want = conv(x)
    assert widen_stem(net, 3, True, "t") == 3 and conv.weight.shape == (4, 9, 3, 3)
    torch.testing.assert_close(conv(x.repeat(1, 3, 1, 1)), want, rtol=1e-6, atol=1e-6)
    big = nn.Sequential(nn.Conv2d(3, 256, 3, bias=False))
    widen_stem(big, 4, False, "t")
    std = big[0].weight.std().item()
    assert abs(std / math.sqrt(2 / (12 * 9)) - 1) < 0.05


def test_test_time_tiling_and_averaging():
    """The loop's evaluation path feeds one image; the model's heads are the
    widened network's on its M copies; the plain prediction is their mean
    softmax (computed here head by head)."""
    torch.manual_seed(1)
    m = create_method("mimo")
    model, _ = build_model("smallcnn", 12, m.heads, 5, arch=model_arch(m))
    images = torch.randint(0, 256, (6, 3, 12, 12), dtype=torch.uint8)
    logits = predict_logits(model, images, 4)
    assert logits.shape == (6, 3, 5) and model.backbone[0][0].in_channels == 9
    with torch.no_grad():  # the three copies stacked here, through the layers directly
        tiled = torch.cat([normalise(images)] * 3, dim=1)
        direct = model.head(model.backbone(tiled)).view(6, 3, 5).numpy()
    np.testing.assert_allclose(logits, direct, rtol=1e-5, atol=1e-6)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    want = sum(e[:, h] / e[:, h].sum(-1, keepdims=True) for h in range(3)) / 3
    np.testing.assert_allclose(head_probs(logits), want, rtol=1e-6)


def test_members_are_the_records_heads(tmp_path):
    """A tiny run through the normal path: the record's test logits are [N, M, K],
    and the kept model on the test images (tiled) gives them bit for bit."""
    from bench.core.record import Record
    from bench.train.evaluate import model_for, predict_array, train_config
    from bench.train.experiment import make_experiment, run_seed
    from tests.conftest import digits_subset

    tiny = digits_subset(24, 16, 16)
    cfg = TrainConfig(cycles=1, epochs_per_cycle=1, batch_size=8)
    exp = make_experiment(tiny, "smallcnn", create_method("mimo"), cfg)
    _, path = run_seed(exp, tiny, create_method("mimo"), 0, tmp_path, device="cpu",
                       progress=False, keep_weights=True)
    record = Record(path)
    test = record.predictions["test_logits"]
    assert record.heads == 3 and test.shape == (16, 3, tiny.num_classes)
    assert np.isfinite(test).all() and not np.array_equal(test[:, 0], test[:, 1])
    again = predict_array(model_for(record), tiny.split("test").images, train_config(record),
                          "cpu")
    np.testing.assert_array_equal(again, test)


def test_the_graph_safe_step_is_the_per_step_path(tiny):
    def run(graph):
        torch.manual_seed(2)
        m = create_method("mimo", {"mimo_rho": "0.5"})
        model, _ = build_model("smallcnn", tiny.image_size, 3, tiny.num_classes, arch=m.arch)
        cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1, graph=graph)
        return train(model, m, cfg, tiny, 2, progress=False)

    a, b = run("true"), run("false")
    assert np.array_equal(a.test_logits, b.test_logits)
    for k, v in a.state.items():
        assert torch.equal(v, b.state[k]), k


def test_a_backbone_without_a_stem_is_refused_in_one_line(tmp_path, capsys):
    results = tmp_path / "r"
    argv = ["run", "--method", "mimo", "--dataset", "digits", "--backbone", "timm:tresnet_m",
            "--profile", "quick", "--seeds", "1", "--results", str(results)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mimo: backbone 'timm:tresnet_m'" in err
    assert not results.exists()


def test_a_killed_run_resumes_bit_for_bit(tiny, tmp_path):
    """The pairing draws come from the run's saved generators: a run killed
    after its first cycle ends with the uninterrupted run's record."""
    from bench.train.experiment import make_experiment, run_seed
    from tests.train.test_resume import Killed, _killer, _same_record

    def method():
        return create_method("mimo", {"mimo_rho": "0.5"})

    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=1, momentum=0.9)
    exp = make_experiment(tiny, "smallcnn", method(), cfg)
    per_cycle = len(tiny.train) // exp.train.batch_size
    _, whole = run_seed(exp, tiny, method(), 0, tmp_path / "whole", progress=False)
    with pytest.raises(Killed):
        run_seed(exp, tiny, method(), 0, tmp_path / "cut", progress=False,
                 on_step=_killer(per_cycle + 1, []))
    _, resumed = run_seed(exp, tiny, method(), 0, tmp_path / "cut", progress=False)
    _same_record(resumed, whole)
