"""The paper's training loop: schedule, batching, determinism, divergence."""
import dataclasses

import numpy as np
import pytest
import torch

from bench.train.backbones import build_model
from bench.core.config import PROFILES
from bench.methods import create_method
from bench.core.schedule import cosine_lr, steps_per_epoch
from bench.train.loop import NonFiniteLoss, epoch_batches, train


def test_cosine_lr_matches_torch_warm_restarts():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=7, eta_min=0.001)
    for step in range(30):  # > 4 cycles, so restarts are covered
        assert cosine_lr(step, 7, 0.01, 0.001) == pytest.approx(opt.param_groups[0]["lr"],
                                                                rel=1e-9, abs=1e-12)
        opt.step()
        sched.step()


@pytest.mark.parametrize("n, bs", [(17, 8), (16, 8), (9, 8), (1, 8), (25, 4)])
def test_epoch_batches_cover_the_data_once(n, bs):
    batches = epoch_batches(n, bs, torch.Generator().manual_seed(0))
    seen = torch.cat(batches).tolist()
    assert len(seen) == len(set(seen))  # no repeats
    assert len(batches) == steps_per_epoch(n, bs)
    # only a trailing single image may be dropped (BatchNorm cannot use it)
    assert len(seen) == n - (1 if n % bs == 1 and n > 1 else 0)


def _train(bundle, seed, **changes):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=1, **changes)
    method = create_method("sl1h")
    torch.manual_seed(seed)
    model, _ = build_model("smallcnn", bundle.image_size, 1, bundle.num_classes)
    return train(model, method, cfg, bundle, seed, progress=False)


def test_same_seed_gives_identical_results(tiny_digits):
    a, b = _train(tiny_digits, 3), _train(tiny_digits, 3)
    np.testing.assert_array_equal(a.test_logits, b.test_logits)
    np.testing.assert_array_equal(a.val_logits, b.val_logits)
    assert a.cycle_val_auc == b.cycle_val_auc
    c = _train(tiny_digits, 4)
    assert not np.array_equal(a.test_logits, c.test_logits)


def test_result_shapes_and_best_cycle(tiny_digits):
    res = _train(tiny_digits, 0)
    assert res.test_logits.shape == (60, 1, 10) and res.val_logits.shape == (60, 1, 10)
    assert len(res.cycle_val_auc) == 2
    assert res.best_cycle == 1 + int(np.argmax(res.cycle_val_auc))
    assert res.steps == 2 * steps_per_epoch(96, 8)


def test_divergence_is_a_clear_error(tiny_digits):
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss .* step \d+"):
        _train(tiny_digits, 0, lr=1e12)


def test_best_cycle_checkpoint_is_the_one_tested(tiny_digits, monkeypatch):
    """Scripted AUCs make cycle 1 the best of 2: the returned logits must come
    from cycle 1's weights, not the last ones."""
    import bench.train.loop as trainer

    seen, scripted = [], iter([0.9, 0.5])

    def fake_auc(probs, labels):
        seen.append(probs.copy())
        return next(scripted)

    import bench.train.protocol as protocol  # the checkpoint score is computed there

    monkeypatch.setattr(protocol, "auc_ovr_macro", fake_auc)
    cfg = dataclasses.replace(PROFILES["quick"], cycles=2, epochs_per_cycle=1)
    torch.manual_seed(0)
    model, _ = build_model("smallcnn", tiny_digits.image_size, 1, tiny_digits.num_classes)
    res = train(model, create_method("sl1h"), cfg, tiny_digits, 0, progress=False)
    assert res.best_cycle == 1 and res.cycle_val_auc == [0.9, 0.5]
    from bench.calib.metrics import head_probs

    np.testing.assert_allclose(head_probs(res.val_logits), seen[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(seen[0], seen[1])  # the cycles really differ
    # the model is left with cycle 1's weights: predicting again gives the
    # returned validation and test logits
    images = {s: trainer.to_device_images(tiny_digits.split(s).images, "cpu")
              for s in ("val", "test")}
    for split, got in (("val", res.val_logits), ("test", res.test_logits)):
        np.testing.assert_allclose(trainer.predict_logits(model, images[split], 256), got,
                                   rtol=1e-5, atol=1e-6)
