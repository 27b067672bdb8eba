"""`bench report --cost` puts the efficient ensembles' cost beside 4HML's and
D-Ens's (issue 41): each row's parameters in groups.csv equal the model's
counted here independently (D-Ens: the sum over its members), and the
terminal table shows the cost columns on every one of those rows."""
from __future__ import annotations

import csv

import pytest

from bench.cli.main import main
from bench.core.config import TrainConfig
from bench.methods import create_method
from bench.train.backbones import build_model, model_arch

RUNS = (("sl1h", (0, 1)), ("4hml", (0,)), ("batchensemble", (0,)), ("packed", (0,)))


def n_params(name: str) -> int:
    m = create_method(name)
    model = build_model("smallcnn", 12, m.heads, 10, arch=model_arch(m))[0]
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    from bench.train.experiment import make_experiment, run_seed
    from tests.conftest import digits_subset

    tiny = digits_subset(24, 20, 20)
    root = tmp_path_factory.mktemp("results")
    cfg = TrainConfig(cycles=1, epochs_per_cycle=1, batch_size=8)
    for name, seeds in RUNS:
        exp = make_experiment(tiny, "smallcnn", create_method(name), cfg)
        for s in seeds:
            run_seed(exp, tiny, create_method(name), s, root, device="cpu", progress=False)
    return root, tmp_path_factory.mktemp("reports")


def test_params_and_train_time_beside_4hml_and_dens(reported, capsys):
    root, out = reported
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots", "--no-ts",
                 "--no-progress", "--cost"]) == 0
    table = capsys.readouterr().out
    with open(out / "groups.csv") as f:
        rows = {r["row"]: r for r in csv.DictReader(f)}
    want = {n: n_params(n) for n, _ in RUNS}
    want["dens"] = 2 * want["sl1h"]
    assert {r: float(rows[r]["n_params"]) for r in want} == want
    assert all(float(rows[r]["train_seconds"]) > 0 for r in want)
    # BatchEnsemble: one network plus, per member, r and s of every layer
    # (smallcnn: 3-32-64-128-128 convs, a 128 -> 10 classifier) and its own
    # bias (one bias was the plain network's already)
    fast = sum(a + b for a, b in ((3, 32), (32, 64), (64, 128), (128, 128), (128, 10)))
    assert want["batchensemble"] == want["sl1h"] + 4 * fast + 3 * 10
    assert abs(want["packed"] / want["sl1h"] - 1) < 0.02  # alpha^2 / M = 1 backbone
    lines = {ln.split("  ")[0].strip(): ln for ln in table.splitlines()}
    for label, row in (("4HML", "4hml"), ("D-Ens", "dens"), ("BatchEnsemble", "batchensemble"),
                       ("Packed-Ens", "packed")):
        assert f"{float(rows[row]['n_params']) / 1e6:.2f}" in lines[label]
        assert f"{float(rows[row]['train_seconds']):.1f}" in lines[label]
