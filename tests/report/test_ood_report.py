"""`bench report --ood` (issue 33, "Reports"): AUROC and FPR95 of each score
against scikit-learn's roc_auc_score and a threshold count computed here,
mean ± population std over seeds, MI only for multi-head rows (– for one
head), D-Ens as the sl1h seeds stacked, the tidy CSV. Records fabricated by
tests/evalrecords.py."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from evalrecords import SEEDS, record, write
from scipy.special import softmax
from sklearn.metrics import roc_auc_score

from bench.cli.main import main
from bench.core.record import Record


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results = write(tmp_path_factory.mktemp("results"), shift=False)
    out = tmp_path_factory.mktemp("out")
    assert main(["report", "--results", str(results), "--out", str(out), "--ood", "--no-plots",
                 "--no-progress", "--no-ts"]) == 0
    return results, out


def logits(results, method, seed):
    rec = Record(record(results, method, seed))
    return rec.predictions["test_logits"], rec.eval_set("ood-kvasir")["logits"]


def entropy(p):
    return -(p * np.log(p)).sum(-1)


def hand_scores(z) -> dict:
    """Scores computed here: higher = more in-distribution."""
    per_head = softmax(z.astype(np.float64), axis=-1)
    mean = per_head.mean(1)
    out = {"msp": mean.max(1), "entropy": -entropy(mean)}
    if z.shape[1] > 1:
        out["mi"] = -(entropy(mean) - entropy(per_head).mean(1))
    return out


def fpr95(s_in, s_out) -> float:
    """Share of OOD scores at or above the highest threshold that keeps 95% of
    the in-distribution scores (no ties in these data)."""
    t = np.sort(s_in)[::-1][int(np.ceil(0.95 * len(s_in))) - 1]
    return float((s_out >= t).mean())


def hand(z_in, z_out) -> dict:
    a, b = hand_scores(z_in), hand_scores(z_out)
    return {s: {"auroc": roc_auc_score(np.r_[np.ones(len(a[s])), np.zeros(len(b[s]))],
                                       np.r_[a[s], b[s]]),
                "fpr95": fpr95(a[s], b[s])} for s in a}


def table(out) -> pd.DataFrame:
    return pd.read_csv(out / "ood" / "ood_table.csv")


def value(df, method, score, metric, col="mean"):
    hit = df[(df["method"] == method) & (df["score"] == score) & (df["metric"] == metric)]
    return hit[col].item()


@pytest.mark.parametrize("method", ["sl1h", "2hml"])
def test_auroc_and_fpr95_against_sklearn_and_a_count(report, method):
    results, out = report
    df = table(out)
    per_seed = [hand(*logits(results, method, seed)) for seed in SEEDS]
    for score in per_seed[0]:
        for metric in ("auroc", "fpr95"):
            got = [d[score][metric] for d in per_seed]
            assert value(df, method, score, metric) == pytest.approx(np.mean(got), abs=1e-12)
            assert value(df, method, score, metric, "std") == pytest.approx(np.std(got),
                                                                          abs=1e-12)


def test_mi_only_for_multi_head_rows(report):
    results, out = report
    df = table(out)
    assert "mi" not in set(df[df["method"] == "sl1h"]["score"])
    assert "mi" in set(df[df["method"] == "2hml"]["score"])
    md = (out / "tables" / "ood_toy_resnet50_kvasir.md").read_text().splitlines()
    sl1h = [c.strip() for c in next(r for r in md if r.startswith("| SL1H")).strip("|").split("|")]
    hml = [c.strip() for c in next(r for r in md if r.startswith("| 2HML")).strip("|").split("|")]
    assert sl1h[-2:] == ["–", "–"] and "–" not in hml
    auroc = value(df, "2hml", "mi", "auroc") * 100
    std = value(df, "2hml", "mi", "auroc", "std") * 100
    assert hml[-2].startswith(f"{auroc:.2f} ± {std:.2f}")


def test_dens_stacks_the_sl1h_seeds_as_heads(report):
    results, out = report
    pairs = [logits(results, "sl1h", seed) for seed in SEEDS]
    z_in = np.concatenate([p[0] for p in pairs], axis=1)
    z_out = np.concatenate([p[1] for p in pairs], axis=1)
    want = hand(z_in, z_out)
    df = table(out)
    for score in ("msp", "entropy", "mi"):
        assert value(df, "dens", score, "auroc") == pytest.approx(want[score]["auroc"], abs=1e-12)
    assert np.isnan(value(df, "dens", "msp", "auroc", "std"))


def test_tidy_csv_holds_every_metric(report):
    _, out = report
    df = pd.read_csv(out / "ood" / "ood_long.csv")
    assert list(df.columns) == ["dataset", "backbone", "method", "variant", "seed", "ood_set",
                                "score", "metric", "value"]
    assert set(df["metric"]) == {"auroc", "aupr_in", "aupr_out", "fpr95"}
    assert set(df["ood_set"]) == {"kvasir"}
    assert df[df["method"] == "dens"]["seed"].isna().all()
    raw = pd.read_csv(out / "ood" / "ood_long.csv", dtype=str)
    assert set(raw["seed"].dropna()) == {"0", "1"}  # integers, not 0.0
    # 4 runs: 2 sl1h x 2 scores, 2 2hml x 3 scores; D-Ens 3 scores; 4 metrics each
    assert len(df) == (2 * 2 + 2 * 3 + 3) * 4
