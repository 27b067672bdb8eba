"""BatchEnsemble and Packed-Ensembles as methods (issue 41): defaults and
their sources, the loss is the mean of the members' cross-entropies
(computed here member by member), the members are the record's heads, the
model is rebuilt for `bench eval` from a record's config, and `--fuse
methods` stacks each only with its own arch. The layers' equations:
tests/train/test_ensembles.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from bench.methods import create_method
from bench.train.backbones import build_model, model_arch
from bench.train.evaluate import arch_of, mc_dropout_of


def test_defaults_heads_and_arch():
    be, pe = create_method("batchensemble"), create_method("packed")
    assert (be.params.be_members, be.heads, be.arch) == (4, 4, ("batchensemble", 4))
    assert (pe.params.pe_alpha, pe.params.pe_members, pe.params.pe_gamma) == (2, 4, 1)
    assert (pe.heads, pe.arch) == (4, ("packed", 4, 2, 1))
    assert create_method("packed", {"pe_members": "2", "pe_alpha": "4"}).arch == ("packed", 2, 4, 1)
    assert be.table_section() == pe.table_section() == "multi-head"
    assert model_arch(create_method("4hml")) == () and model_arch(SimpleNamespace()) == ()
    assert model_arch(SimpleNamespace(mc_dropout=0.3)) == ("mcdropout", 0.3)


@pytest.mark.parametrize("name", ["batchensemble", "packed"])
def test_loss_is_the_mean_of_the_members_ce(name):
    g = torch.Generator().manual_seed(1)
    z = torch.randn(6, 4, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3, 4, 0])
    want = sum(-torch.log_softmax(z[:, i], -1)[torch.arange(6), y].mean() for i in range(4)) / 4
    assert create_method(name).loss(z, y).item() == pytest.approx(want.item(), rel=1e-12)


def test_rebuilt_for_bench_eval_from_the_config():
    for method, params in (("batchensemble", {"be_members": 3}),
                           ("packed", {"pe_members": 2, "pe_alpha": 2, "pe_gamma": 2,
                                       "pe_gamma_rule": "every"})):
        arch = arch_of({"method": method, "method_params": params})
        assert arch == model_arch(create_method(method, {k: str(v) for k, v in params.items()}))
        a, _ = build_model("smallcnn", 12, arch[1], 3, arch=arch)
        b, _ = build_model("smallcnn", 12, arch[1], 3, arch=arch)
        b.load_state_dict(a.state_dict())  # the same architecture, key for key
        with pytest.raises(RuntimeError):
            build_model("smallcnn", 12, arch[1], 3)[0].load_state_dict(a.state_dict())
    assert arch_of({"method": "mcdropout", "method_params": {"mc_p": 0.2}}) == ("mcdropout", 0.2)
    assert mc_dropout_of({"method": "packed", "method_params": {}}) == 0.0
    assert arch_of({"method": "sl1h"}) == arch_of({"method": "not-loaded-plugin"}) == ()


def test_fuse_methods_stacks_only_the_same_arch():
    from bench.train.groups import methods_key

    def spec(method, **over):
        return SimpleNamespace(method=method, method_overrides=tuple(over.items()),
                               dataset="digits", backbone="smallcnn", train=None, sizes=None,
                               data_root=None, load_options=(), weights=None, results="r",
                               device="cpu")

    keys = {n: methods_key(spec(n)) for n in ("4hml", "batchensemble", "packed", "mcdropout")}
    assert len(set(keys.values())) == 4
    assert methods_key(spec("packed", pe_gamma="2")) != keys["packed"]
    assert methods_key(spec("mcdropout", mc_p="0.2")) != keys["mcdropout"]  # p is the model's
    assert methods_key(spec("batchensemble")) == keys["batchensemble"]


def test_packed_on_a_backbone_it_cannot_pack_stops_the_grid_in_one_line(capsys, tmp_path):
    from bench.cli.main import main

    argv = ["run", "--method", "packed", "--dataset", "digits", "--backbone", "convnext_tiny",
            "--profile", "quick", "--seeds", "1", "--dry-run", "--results", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "built only on the registered conv / batch-norm backbones" in err
