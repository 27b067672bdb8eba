"""Fused multi-seed training equals each seed trained alone (CPU, float tolerance)."""
import copy
import dataclasses

import numpy as np
import pytest
import torch

from bench.train.backbones import build_model
from bench.core.config import PROFILES
from bench.train.fused import FusedModel, train_fused
from bench.methods import create_method
from bench.train.loop import NonFiniteLoss, train

SEEDS = [0, 1, 2]


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(bundle, seed, heads=2):
    torch.manual_seed(seed)  # as experiment.run_seed: initial weights from the seed
    return build_model("smallcnn", bundle.image_size, heads, bundle.num_classes)[0]


def _cfg(**kw):
    return dataclasses.replace(PROFILES["quick"], **{"cycles": 2, "epochs_per_cycle": 1, **kw})


def _method():
    return create_method("sl1h")


def test_fused_forward_equals_each_model():
    models = [_model_from_seed(s) for s in SEEDS]
    x = torch.randn(len(SEEDS), 4, 3, 12, 12)
    fm = FusedModel(models, "cpu")
    fm.train(False)
    out = fm(x)
    for s, m in enumerate(models):
        torch.testing.assert_close(out[s], m.eval()(x[s]), rtol=1e-5, atol=1e-5)


def _model_from_seed(seed):
    torch.manual_seed(seed)
    return build_model("smallcnn", 12, 2, 10)[0]


@pytest.mark.parametrize("mode", ["batched", "per_image"])
def test_fused_run_equals_runs_alone(tiny, mode):
    cfg = _cfg(augment_mode=mode)
    alone = [train(_model(tiny, s), _method(), cfg, tiny, s, progress=False) for s in SEEDS]
    fused = train_fused([_model(tiny, s) for s in SEEDS], [_method() for _ in SEEDS], cfg,
                        tiny, SEEDS, progress=False)
    for a, f in zip(alone, fused):
        np.testing.assert_allclose(f.test_logits, a.test_logits, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(f.val_logits, a.val_logits, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(f.cycle_val_auc, a.cycle_val_auc, atol=1e-6)
        assert f.best_cycle == a.best_cycle and f.steps == a.steps
    # the seeds really differ, so the comparison above is not vacuous
    assert not np.allclose(fused[0].test_logits, fused[1].test_logits, atol=1e-2)


def test_fused_divergence_names_the_step(tiny):
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss .* step \d+"):
        train_fused([_model(tiny, s) for s in SEEDS[:2]], [_method(), _method()],
                    _cfg(lr=1e12), tiny, SEEDS[:2], progress=False)


def test_run_members_writes_the_records_run_seed_writes(tiny, tmp_path):
    from bench.core import store
    from bench.train.groups import run_members
    from bench.train.experiment import make_experiment, run_seed

    method = _method()
    exp = make_experiment(tiny, "smallcnn", method, _cfg(cycles=1))
    got = run_members([(exp, method, s) for s in (0, 1)], tiny, tmp_path / "fused",
                      progress=False)
    assert [g[0] for g in got] == ["done", "done"]
    status, alone = run_seed(exp, tiny, _method(), 1, tmp_path / "alone", progress=False)
    fused = store.load_predictions(got[1][1])
    np.testing.assert_allclose(fused["test_logits"], store.load_predictions(alone)["test_logits"],
                               rtol=1e-3, atol=1e-4)
    assert store.read_json(got[1][1] / "config.json")["fused_group"] == [0, 1]
    again = run_members([(exp, method, s) for s in (0, 1, 2)], tiny, tmp_path / "fused",
                        progress=False)
    assert [g[0] for g in again] == ["skipped", "skipped", "done"]


def test_fused_evaluation_gives_each_member_the_whole_eval_batch(monkeypatch):
    """A group evaluates eval_batch_size images per member per call, as a run
    alone does (issue 38), with each member's own logits."""
    from bench.train.fused import predict_fused
    from bench.train.loop import predict_logits

    models = [_model_from_seed(s) for s in SEEDS]
    images = torch.randint(0, 256, (20, 3, 12, 12), dtype=torch.uint8)
    fm = FusedModel(models, "cpu")
    sizes, call = [], FusedModel.__call__
    monkeypatch.setattr(FusedModel, "__call__",
                        lambda self, x, **kw: sizes.append(len(x)) or call(self, x, **kw))
    out = predict_fused(fm, images, _cfg(eval_batch_size=7))
    assert sizes == [7, 7, 6]  # 20 images, 7 a call, for every member at once
    for s, m in enumerate(models):
        np.testing.assert_allclose(out[s], predict_logits(m, images, 20), rtol=1e-5, atol=1e-5)


def test_compiled_fused_training_equals_eager(tiny):
    """compile=true compiles the group's training forward (vmap and all; the
    backward and BatchNorm's running statistics follow): same results as
    eager within float reordering, and not bit-identical (it did run)."""
    def run(**kw):
        cfg = dataclasses.replace(_cfg(cycles=2, batch_size=16), **kw)  # 6 steps
        methods = [create_method("2hml") for _ in SEEDS[:2]]
        for m, s in zip(methods, SEEDS):
            m.setup(tiny.num_classes, s)
        models = [_model(tiny, s) for s in SEEDS[:2]]
        return train_fused(models, methods, cfg, tiny, SEEDS[:2], progress=False)

    from torch._dynamo.utils import counters

    eager = run()
    counters.clear()
    compiled = run(compile=True)
    assert counters["stats"]["unique_graphs"] >= 1  # dynamo captured the fused forward
    for e, c in zip(eager, compiled):
        diff = np.abs(e.test_logits - c.test_logits).max()
        # float32 reordering only (u = 6e-8) over 6 steps: measured 3.7e-7 relative
        assert diff < 1e-5 * np.abs(e.test_logits).max()
        assert e.best_cycle == c.best_cycle


def test_one_loop_reports_every_step_alone_and_fused_with_equal_losses(tiny, monkeypatch):
    """Single runs and fused groups share the loop's on_step hook: it sees every
    step, with the run's loss (one per member when fused), and each fused
    member's loss equals that seed's loss trained alone, step by step."""
    import bench.train.fused as fused_mod

    cfg = _cfg()
    alone = {}
    with monkeypatch.context() as m:  # a single run never goes through vmap
        m.setattr(fused_mod, "vmap", lambda *a, **k: pytest.fail("single run used vmap"))
        for s in SEEDS[:2]:
            alone[s] = []
            train(_model(tiny, s), _method(), cfg, tiny, s, progress=False,
                  on_step=lambda step, loss, s=s: alone[s].append((step, loss.clone())))
    group = []
    train_fused([_model(tiny, s) for s in SEEDS[:2]], [_method(), _method()], cfg, tiny,
                SEEDS[:2], progress=False,
                on_step=lambda step, loss: group.append((step, loss.clone())))
    n = 2 * (len(tiny.train) // cfg.batch_size)
    assert [st for st, _ in group] == list(range(1, n + 1)) == [st for st, _ in alone[0]]
    assert all(loss.shape == () for _, loss in alone[0]) and group[0][1].shape == (2,)
    for i, (_, losses) in enumerate(group):
        for s in SEEDS[:2]:
            torch.testing.assert_close(losses[s], alone[s][i][1], rtol=1e-4, atol=1e-5)
    assert not torch.equal(group[-1][1][0], group[-1][1][1])  # the members differ


def test_fused_batch_norm_takes_bf16_inputs_like_each_model_alone():
    """Under bf16 autocast on CUDA a convolution hands batch norm a bf16 input
    with fp32 statistics; alone that mix is allowed, under vmap it failed
    ("Expected running_mean to have type BFloat16", on an H100). Fused, each
    member's output and running statistics equal its model's own."""
    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.BatchNorm2d(4)).train() for _ in range(3)]
    x = torch.randn(3, 8, 4, 5, 5).bfloat16()
    alone = [m(xi) for m, xi in zip(copy.deepcopy(models), x)]
    fm = FusedModel(models, "cpu")
    fm.train(True)
    out = fm(x)
    assert out.dtype == torch.bfloat16
    for s, (m, ref) in enumerate(zip(models, alone)):
        assert torch.allclose(out[s].float(), ref.float(), atol=1e-2)
    ran = [copy.deepcopy(m) for m in models]
    for m, xi in zip(ran, x):
        m(xi)
    for s, m in enumerate(ran):
        assert torch.allclose(fm.buffers["0.running_mean"][s], m[0].running_mean, atol=1e-3)


def test_convnext_pooling_as_a_mean_changes_no_logit():
    """A fused ConvNeXt pools with MeanPool2d (vmap batches it; AdaptiveAvgPool2d
    on its permuted input hit a member-by-member fallback): the same numbers."""
    from bench.train.nets import MeanPool2d

    torch.manual_seed(0)
    models = [build_model("convnext_tiny", 32, 2, 3)[0].eval() for _ in range(2)]
    x = torch.randn(2, 2, 3, 32, 32)
    with torch.no_grad():
        alone = torch.stack([m(xi) for m, xi in zip(models, x)])
        fm = FusedModel(copy.deepcopy(models), "cpu")
        fm.train(False)
        fused = fm(x)
    assert any(isinstance(m, MeanPool2d) for m in fm.base.modules())
    assert torch.allclose(fused, alone, atol=1e-5)
