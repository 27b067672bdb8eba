"""`bench report --shift` (issue 33, "Measures under shift" and "Reports"):
the shift table's numbers against a hand computation (numpy, scipy), the
temperature fitted on the in-distribution validation split and not on the
shifted data, fitted once per record and cached, the tidy CSV, the box plots,
the refusal without sets and a damaged set set aside. Records fabricated
by tests/evalrecords.py (no training)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from evalrecords import (CORRUPTIONS, HEADS, SEEDS, SEVERITIES, blocks, record,
                         shift_arrays, write)
from scipy.optimize import minimize_scalar
from scipy.special import softmax

from bench.cli.main import main
from bench.calib import variants as V
from bench.core.record import Record
from bench.report import ReportOptions, build
from bench.report.evals import shift as S
from bench.report.evals import shifttables
from bench.report.numbers.aggregate import load_runs
from bench.report.numbers.cells import Cache


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return write(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def shift_rep(results):
    return build(results, ReportOptions(shift=True, no_plots=True, no_progress=True)).shift


# ------------------------------------------------ an independent computation --
def hand_ece(p, y, bins=15):
    conf, right = p.max(1), p.argmax(1) == y
    idx = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)  # bins (lo, hi]
    return sum(abs(right[idx == b].mean() - conf[idx == b].mean()) * (idx == b).mean()
               for b in range(bins) if (idx == b).any())


def hand(p, y) -> dict:
    return {"acc": float((p.argmax(1) == y).mean()), "ece": hand_ece(p, y),
            "nll": float(-np.log(p[np.arange(len(y)), y]).mean())}


def plain(z):  # [N, M, K] -> mean of the head softmaxes
    return softmax(z.astype(np.float64), axis=-1).mean(axis=1)


def temperature(z, y) -> float:
    """T minimising the NLL of the head-averaged logits (scipy, bounded)."""
    zm = z.astype(np.float64).mean(axis=1)
    res = minimize_scalar(lambda t: -np.log(softmax(zm / t, axis=1)[np.arange(len(y)), y]).mean(),
                          bounds=(0.05, 20), method="bounded", options={"xatol": 1e-9})
    return float(res.x)


def scaled(z, t):
    return softmax(z.astype(np.float64).mean(axis=1) / t, axis=1)


def val(results, method, seed):
    p = Record(record(results, method, seed)).predictions
    return p["val_logits"], p["val_labels"]


def expected(results, method, variant, s_index, measure) -> float:
    """Mean over seeds of the measure averaged over corruptions at one severity."""
    per_seed = []
    for seed in SEEDS:
        sets = shift_arrays(method, seed)
        t = temperature(*val(results, method, seed)) if variant == "ts" else None
        per_seed.append(np.mean([
            hand(plain(z) if t is None else scaled(z, t), sets["labels"])[measure]
            for z in sets["logits"][:, s_index]]))
    return float(np.mean(per_seed))


def cell(rep, row, severity):
    (_, table), = rep.tables
    return table.cells[(row, S.severity_key(severity))]


# -------------------------------------------------------------------- tests --
@pytest.mark.parametrize("method", list(HEADS))
@pytest.mark.parametrize("variant", ["plain", "ts"])
def test_shift_cells_are_the_mean_over_corruptions_and_seeds(results, shift_rep, method,
                                                             variant):
    row = method if variant == "plain" else f"{method}+ts"
    tol = 1e-6 if variant == "plain" else 2e-4  # two optimisers' temperatures
    for i, s in enumerate(SEVERITIES):
        c = cell(shift_rep, row, s)
        for m in ("acc", "ece", "nll"):
            assert c.mean[m] == pytest.approx(expected(results, method, variant, i, m), abs=tol), \
                (row, s, m)


def test_dens_under_shift_is_the_sl1h_seeds_ensemble(shift_rep):
    sets = [shift_arrays("sl1h", seed) for seed in SEEDS]
    for i, s in enumerate(SEVERITIES):
        want = np.mean([hand(np.mean([plain(st["logits"][c, i]) for st in sets], axis=0),
                             sets[0]["labels"])["ece"] for c in range(len(CORRUPTIONS))])
        c = cell(shift_rep, "dens", s)
        assert c.mean["ece"] == pytest.approx(want, abs=1e-6) and c.std is None


def test_ts_is_fitted_on_the_in_distribution_validation_split(results, shift_rep):
    """The +TS cell matches T fitted on the validation logits (sharp: T ~ 6)
    and not T fitted on the shifted logits themselves (soft: T ~ 2): a
    calibrator fitted on the shifted data fails this test."""
    method, i = "sl1h", SEVERITIES.index(2)
    fitted_val, fitted_shift = [], []
    for seed in SEEDS:
        sets = shift_arrays(method, seed)
        z = sets["logits"][:, i]
        y = np.tile(sets["labels"], len(CORRUPTIONS))
        t_val, t_shift = temperature(*val(results, method, seed)), temperature(
            z.reshape(-1, *z.shape[2:]), y)
        assert t_val > 2 * t_shift  # far apart: the data tell the two fits apart
        fitted_val.append(np.mean([hand(scaled(zc, t_val), sets["labels"])["ece"] for zc in z]))
        fitted_shift.append(np.mean([hand(scaled(zc, t_shift), sets["labels"])["ece"]
                                     for zc in z]))
    got = cell(shift_rep, "sl1h+ts", 2).mean["ece"]
    assert got == pytest.approx(np.mean(fitted_val), abs=2e-4)
    assert abs(got - np.mean(fitted_shift)) > 0.02


@pytest.mark.parametrize("name", ["plain", "ts-base", *V.posthoc(), "dens"])
def test_stacked_slices_equal_one_slice_at_a_time(results, name):
    """A variant applied once to all corruptions x severities (fitted once)
    gives what it gives applied to each slice on its own."""
    v = V.get(name)
    recs = [Record(record(results, "sl1h", seed)) for seed in SEEDS]
    recs = recs if v.ensemble else recs[:1]
    sets = [S.grid(r.eval_set("shift")) for r in recs]
    probs, labels = S.slices(v, recs, sets)
    for c in range(len(CORRUPTIONS)):
        for j in range(len(SEVERITIES)):
            preds = [{**r.predictions, "test_logits": s["logits"][c, j],
                      "test_labels": s["labels"]} for r, s in zip(recs, sets)]
            one, _, _ = v.apply(preds if v.ensemble else preds[0])
            np.testing.assert_allclose(probs[c, j], one, atol=1e-9, err_msg=f"{name} {c} {j}")


def test_temperature_fitted_once_per_record_then_cached(results, tmp_path, monkeypatch):
    calls = []
    real = V.fit_temperature
    monkeypatch.setattr(V, "fit_temperature", lambda *a, **k: calls.append(1) or real(*a, **k))
    reads = []
    real_read = Record.eval_set
    monkeypatch.setattr(Record, "eval_set", lambda self, n: reads.append(n) or real_read(self, n))
    runs = load_runs(results)
    cache = Cache(tmp_path / "measures.json")
    S.compute(runs, [V.PLAIN, V.TS], cache, ["acc", "ece"])
    assert len(calls) == len(runs) == 4  # not once per corruption or severity
    assert len(reads) == 4 + 2  # each record's set once for both variants; D-Ens its 2 members
    cache.save()

    def no_read(self, name):
        raise AssertionError("a cached shift set was read again")

    monkeypatch.setattr(Record, "eval_set", no_read)
    again = S.compute(load_runs(results), [V.PLAIN, V.TS], Cache(tmp_path / "measures.json"),
                      ["acc", "ece"])
    assert len(calls) == 4 and len(again.outcomes) == 4 * 2 + 1


def test_tidy_long_csv(results, tmp_path):
    assert main(["report", "--results", str(results), "--out", str(tmp_path), "--shift",
                 "--no-progress", "--no-ts", "--no-plots"]) == 0
    df = pd.read_csv(tmp_path / "shift" / "shift_long.csv")
    assert list(df.columns) == S.LONG_COLUMNS
    measures = {"acc", "ece", "gap", "nll"}
    assert set(df["measure"]) == measures and set(df["variant"]) == {"plain", "dens"}
    assert len(df) == (4 + 1) * len(CORRUPTIONS) * len(SEVERITIES) * len(measures)
    assert df[df["method"] == "dens"]["seed"].isna().all()
    one = df[(df["method"] == "2hml") & (df["seed"] == 1) & (df["corruption"] == "noise")
             & (df["severity"] == 2) & (df["measure"] == "ece")]["value"]
    sets = shift_arrays("2hml", 1)
    assert one.item() == pytest.approx(hand_ece(plain(sets["logits"][1, 2]), sets["labels"]),
                                       abs=1e-6)


def test_box_plots_one_box_per_row_and_severity(results, tmp_path):
    rep = build(results, ReportOptions(shift=True, no_progress=True, no_plots=True,
                                       variants="vs"))
    (ds, bb), = rep.shift.boxes
    data = rep.shift.boxes[(ds, bb)]
    assert data["rows"] == ["SL1H", "SL1H+TS", "SL1H+VS", "D-Ens", "2HML", "2HML+TS", "2HML+VS"]
    assert data["severities"] == list(SEVERITIES)
    assert set(data["boxes"]) == {(r, s) for r in data["rows"] for s in SEVERITIES}
    assert len(data["boxes"][("SL1H", 1)]) == len(CORRUPTIONS) * len(SEEDS)
    assert len(data["boxes"][("D-Ens", 1)]) == len(CORRUPTIONS)
    from bench.report.plotting.shiftplots import box_figure

    fig = box_figure(data, "t")
    assert len(fig.axes[0].patches) == len(data["rows"]) * len(SEVERITIES)
    shifttables.write(rep.shift, tmp_path, plots=True)  # the report's other figures: not here
    for suffix in (".png", ".pdf"):
        assert (tmp_path / "figures" / f"shift_ece_{ds}_{bb}{suffix}").stat().st_size > 1000


@pytest.mark.parametrize("flag,what", [("--shift", "--eval shift"),
                                       ("--ood", "--eval ood:DATASET")])
def test_no_sets_is_one_line_and_exit_2(tmp_path, capsys, flag, what):
    results = write(tmp_path / "results", shift=False, ood=False)
    out = tmp_path / "out"
    assert main(["report", "--results", str(results), "--out", str(out), flag,
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and what in err and "bench eval" in err, err
    assert not out.exists() or not any(out.iterdir())


def test_a_damaged_set_is_named_and_set_aside(tmp_path):
    results = write(tmp_path / "results")
    bad = record(results, "2hml", 1) / "eval-shift.npz"
    bad.write_bytes(bad.read_bytes()[:-100])  # truncated after it was written
    rep = build(results, ReportOptions(shift=True, no_plots=True, no_progress=True))
    assert any("eval-shift.npz" in n and str(bad.parent) in n for n in rep.notes)
    c = cell(rep.shift, "2hml", 1)
    assert (c.n, c.N) == (1, 2)  # the other seed still counts
    assert cell(rep.shift, "sl1h", 1).n == 2 and cell(rep.shift, "dens", 1) is not None


def test_results_shift_is_the_reports_tidy_frame(results, shift_rep):
    import bench.results

    df = bench.results.shift(results)
    pd.testing.assert_frame_equal(df, shift_rep.frame)
    assert len(bench.results.ood(results)) > 0


def test_the_stored_blocks_read_as_the_corruption_by_severity_grid():
    """bench.train.evaluate stores a shift set as blocks (clean, then each
    corruption x severity); the report arranges them as [C, S, N, M, K], the
    clean block standing as severity 0 of every corruption."""
    from bench.report.evals.shift import grid

    want = shift_arrays("2hml", 1)
    got = grid(blocks(want))
    np.testing.assert_array_equal(got["logits"], want["logits"])
    assert list(got["corruptions"]) == list(CORRUPTIONS)
    assert list(got["severities"]) == list(SEVERITIES)
