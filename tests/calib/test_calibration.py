"""Temperature scaling, deep ensembles and the derived summary rows."""
import numpy as np
import pytest

from bench.calib.temperature import ensemble_probs, fit_temperature, scaled_probs
from variantutil import deep_ensemble, temperature_scaled
from bench.core.errors import BenchError
from bench.calib.measures import stored_values as all_metrics
from bench.calib.measures.functions import nll
from bench.calib.metrics import head_probs, softmax
from bench.core.store import write_record
from bench.report.render.summary import summary_rows, summary_table


def synthetic(t_star, n=20000, k=10, seed=0, heads=None):
    """Logits z and labels drawn from softmax(z / T*): the NLL optimum is T*."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 4.0, (n, k))
    p = softmax(z / t_star)
    y = (rng.random((n, 1)) > p.cumsum(1)).sum(1).clip(max=k - 1)
    if heads:  # identical heads: mean of head logits is z again
        z = np.repeat(z[:, None], heads, axis=1)
    return z, y


@pytest.mark.parametrize("t_star", [0.5, 1.7, 3.0])
def test_ts_recovers_known_temperature(t_star):
    z, y = synthetic(t_star, seed=int(10 * t_star))
    assert fit_temperature(z, y) == pytest.approx(t_star, rel=0.05)


def test_ts_multi_head_averages_logits_first():
    z, y = synthetic(2.0, n=4000, heads=3)
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, z.shape)
    z = z + noise - noise.mean(1, keepdims=True)  # heads differ, mean logits unchanged
    t = fit_temperature(z, y)
    assert t == pytest.approx(fit_temperature(z.mean(1), y), rel=1e-9)
    np.testing.assert_allclose(scaled_probs(z, t), softmax(z.mean(1) / t), atol=1e-12)


@pytest.mark.parametrize("case", range(6))
def test_ts_never_raises_validation_nll(case):
    rng = np.random.default_rng(case)
    n, k = 300, 5
    z = rng.normal(0, [0.1, 1, 5, 20, 3, 50][case], (n, k))
    y = [rng.integers(0, k, n), z.argmax(1)][case % 2]  # pure noise, or separable labels
    t = fit_temperature(z, y)
    assert t > 0 and np.isfinite(t)
    assert nll(scaled_probs(z, t), y) <= nll(softmax(z), y) + 1e-9


# ----------------------------------------------------------- records --
def fake_record(root, method, seed, logits, labels):
    path = root / "digits" / "smallcnn" / method / "abc" / f"seed{seed}"
    probs = head_probs(logits)
    metrics = {"val": all_metrics(probs, labels), "test": all_metrics(probs, labels)}
    arrays = {"val_logits": logits, "val_labels": labels,
              "test_logits": logits, "test_labels": labels}
    return write_record(path, {"method": method, "seed": seed}, metrics, arrays)


def rand_logits(seed, n=120, m=1, k=4):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 3, (n, m, k)).astype(np.float32), rng.integers(0, k, n)


def test_ensemble_of_identical_seeds_equals_single_seed(tmp_path):
    logits, labels = rand_logits(0)
    np.testing.assert_allclose(ensemble_probs([logits] * 3), head_probs(logits), atol=1e-7)
    paths = [fake_record(tmp_path, "sl1h", s, logits, labels) for s in range(3)]
    ens = deep_ensemble(paths)
    single = all_metrics(head_probs(logits), labels)
    assert ens["members"] == 3
    for key, value in single.items():
        assert ens["test"][key] == pytest.approx(value, abs=1e-6)


def test_ensemble_is_mean_of_member_probabilities():
    a, _ = rand_logits(1, m=2)
    b, _ = rand_logits(2, m=2)
    expected = (softmax(a.astype(np.float64)).mean(1) + softmax(b.astype(np.float64)).mean(1)) / 2
    np.testing.assert_allclose(ensemble_probs([a, b]), expected, atol=1e-6)


def test_ensemble_errors(tmp_path):
    from bench.report.numbers.aggregate import ensemble_cell

    with pytest.raises(BenchError, match="needs at least 2"):
        ensemble_cell([])
    a, la = rand_logits(3)
    b, lb = rand_logits(4)
    paths = [fake_record(tmp_path, "sl1h", 0, a, la), fake_record(tmp_path, "sl1h", 1, b, lb)]
    with pytest.raises(BenchError, match="disagree"):
        deep_ensemble(paths)


def test_temperature_scaled_record(tmp_path):
    logits, labels = rand_logits(5, m=2)
    path = fake_record(tmp_path, "2hml", 0, logits, labels)
    out = temperature_scaled(path)
    t = fit_temperature(logits, labels)
    assert out["temperature"] == pytest.approx(t)
    expected = all_metrics(softmax(logits.astype(np.float64).mean(1) / t), labels)
    assert out["test"] == pytest.approx(expected)


# ----------------------------------------------------------- summary --
class Exp:
    def __init__(self, method):
        self.method, self.backbone = method, "smallcnn"


def test_summary_has_ts_and_dens_rows(tmp_path):
    groups, paths = [], {}
    for method, heads in (("sl1h", 1), ("2hml", 2)):
        exp = Exp(method)
        for seed in range(2):
            logits = rand_logits(seed, m=heads)[0]
            labels = rand_logits(99)[1]  # members must share the labels
            path = fake_record(tmp_path, method, seed, logits, labels)
            groups.append((exp, path))
            paths.setdefault(method, []).append(path)
    rows = summary_rows(groups)
    # named as the tables name them: display names, +TS, D-Ens; the backbone too
    assert [r[0] for r in rows] == ["SL1H", "SL1H+TS", "D-Ens", "2HML", "2HML+TS"]
    assert {r[1] for r in rows} == {"SmallCNN"}
    dens = deep_ensemble(paths["sl1h"])["test"]
    assert rows[2][2:6] == [2, f"{100 * dens['acc']:.2f}", f"{100 * dens['ece']:.2f}",
                            f"{100 * dens['nll']:.2f}"]
    ts = [temperature_scaled(p) for p in paths["2hml"]]
    temps = [d["temperature"] for d in ts]
    assert rows[4][6] == f"{np.mean(temps):.3f}"
    eces = 100 * np.array([d["test"]["ece"] for d in ts])
    assert rows[4][4] == f"{eces.mean():.2f} ± {eces.std():.2f}"
    assert "| D-Ens" in summary_table(groups)
    one_seed = [g for g in groups if g[0].method == "sl1h"][:1]
    assert [r[0] for r in summary_rows(one_seed)] == ["SL1H", "SL1H+TS"]  # one seed is no ensemble
