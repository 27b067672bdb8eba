"""MC-Dropout (issue 41): the model's passes against closed forms (each pass
zeroes features at rate p and scales the rest by 1/(1-p), so the mean over
many passes is the dropout-free classifier; passes differ in eval mode), the
loss is plain CE of one pass, the model is rebuilt for `bench eval` from a
record's config, and a fused 'methods' group never stacks it with a T-head
model."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.methods import create_method
from bench.train.backbones import build_model
from bench.train.evaluate import mc_dropout_of


def test_defaults_and_heads():
    m = create_method("mcdropout")
    assert (m.params.mc_p, m.params.mc_passes, m.heads, m.mc_dropout) == (0.5, 10, 10, 0.5)
    assert create_method("mcdropout", {"mc_passes": "4"}).heads == 4
    assert m.table_section() == "baseline"


def test_passes_against_closed_forms():
    torch.manual_seed(0)
    model, _ = build_model("smallcnn", 16, 2000, 3, mc_dropout=0.3)
    model.eval()  # MC-Dropout: the passes stay stochastic
    x = torch.rand(2, 3, 16, 16)
    with torch.no_grad():
        z = model(x)  # [2, 2000, 3]
        f = model.backbone(x)
        plain = model.head(f)
        dropped = model.drop(f[:, None, :].expand(-1, 2000, -1))
    assert z.shape == (2, 2000, 3)
    assert not torch.allclose(z[:, 0], z[:, 1])
    # a pass keeps a feature (scaled by 1 / (1 - p)) or zeroes it (features
    # that are 0 already, dead ReLUs, say nothing)
    live = (f != 0)[:, None, :].expand(-1, 2000, -1)
    kept = dropped != 0
    assert live.float().mean().item() > 0.3
    assert kept[live].float().mean().item() == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(dropped[kept].numpy(),
                               (f[:, None, :].expand(-1, 2000, -1) / 0.7)[kept].numpy(),
                               rtol=1e-5)
    # dropout is unbiased: the mean logit over passes is the plain classifier's
    err = (z.mean(1) - plain).abs().max().item()
    assert err < 4 * (z.std(1).max().item() / np.sqrt(2000))


def test_loss_is_ce_of_the_first_pass():
    z = torch.randn(5, 10, 4)
    y = torch.tensor([0, 1, 2, 3, 0])
    got = create_method("mcdropout").loss(z, y)
    p = torch.softmax(z[:, 0].double(), -1)
    assert got.item() == pytest.approx(-torch.log(p[torch.arange(5), y]).mean().item(), rel=1e-6)


def test_rebuilt_for_bench_eval_from_the_config():
    assert mc_dropout_of({"method": "mcdropout", "method_params": {"mc_p": 0.2,
                                                                   "mc_passes": 4}}) == 0.2
    assert mc_dropout_of({"method": "sl1h", "method_params": {}}) == 0.0
    assert mc_dropout_of({"method": "not-loaded-plugin"}) == 0.0
    a, _ = build_model("smallcnn", 16, 4, 3, mc_dropout=0.2)
    b, _ = build_model("smallcnn", 16, 4, 3, mc_dropout=mc_dropout_of(
        {"method": "mcdropout", "method_params": {"mc_p": 0.2, "mc_passes": 4}}))
    b.load_state_dict(a.state_dict())  # the same architecture, key for key
    with pytest.raises(RuntimeError):
        build_model("smallcnn", 16, 4, 3)[0].load_state_dict(a.state_dict())


def test_fuse_methods_keeps_it_apart_from_a_t_head_model():
    from types import SimpleNamespace

    from bench.train.groups import methods_key

    def spec(method):
        return SimpleNamespace(method=method, method_overrides=(), dataset="digits",
                               backbone="smallcnn", train=None, sizes=None, data_root=None,
                               load_options=(), weights=None, results="r", device="cpu")

    assert methods_key(spec("mcdropout")) != methods_key(spec("10hml"))
    assert methods_key(spec("sl1h")) == methods_key(spec("mdca"))
