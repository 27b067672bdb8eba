"""`bench report --ci --metrics ece,dl2ce`: dL2CE's bootstrap interval in
runs.csv, groups.csv and the ± table, redone here with the
uncertainty-calibration package's own binning and estimator, and the note
under the table that says why an ECE interval may miss the true ECE."""
import csv
from pathlib import Path

import numpy as np
import pytest
from report_records import write_known

from bench.cli.main import main
from bench.core import store


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    records = write_known(tmp_path_factory.mktemp("results"))
    out = tmp_path_factory.mktemp("reports")
    assert main(["report", "--results", str(records), "--out", str(out), "--no-plots",
                 "--no-progress", "--no-ts", "--metrics", "ece,dl2ce", "--ci"]) == 0
    return out


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def squared_dl2ce(probs, labels) -> float:
    """The package's debiased squared top-label error before its floor and
    root: its own choice of bins (is_discrete, get_equal_bins or
    get_discrete_bins), binning and unbiased_square_ce."""
    import calibration

    conf, right = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)
    bins = (calibration.get_discrete_bins(conf) if calibration.is_discrete(probs)
            else calibration.get_equal_bins(conf, num_bins=15))
    return calibration.unbiased_square_ce(calibration.bin(list(zip(conf, right)), bins))


def independent_interval(path) -> tuple[float, float]:
    """1,000 resamples (numpy seed 0), each one's squared error shifted so
    that they centre on the test set's own, floored, rooted; percentiles."""
    p = store.load_predictions(path)
    z = p["test_logits"].astype(np.float64)
    e = np.exp(z - z.max(axis=2, keepdims=True))
    probs = (e / e.sum(axis=2, keepdims=True)).mean(axis=1)
    probs /= probs.sum(axis=1, keepdims=True)
    labels = p["test_labels"]
    idx = np.random.default_rng(0).integers(0, len(labels), size=(1000, len(labels)))
    sq = np.array([squared_dl2ce(probs[i], labels[i]) for i in idx])
    values = np.sqrt(np.maximum(sq - sq.mean() + squared_dl2ce(probs, labels), 0))
    return tuple(np.percentile(values, [2.5, 97.5]))


def test_runs_csv_has_dl2ce_intervals_as_the_package_gives_them(report):
    rows = _csv(report / "runs.csv")
    for backbone, method, seed in (("resnet50", "4hml", "1"), ("convnext_tiny", "sl1h", "0")):
        row = next(r for r in rows if (r["backbone"], r["method"], r["seed"])
                   == (backbone, method, seed))
        lo, hi = float(row["dl2ce_boot_lo"]), float(row["dl2ce_boot_hi"])
        # abs 1e-6: the report's probabilities are the float32 softmax, these float64
        assert (lo, hi) == pytest.approx(independent_interval(Path(row["path"])), abs=1e-6)
        assert lo - 1e-12 <= float(row["dl2ce"]) <= hi + 1e-12


def test_one_number_cells_show_the_dl2ce_interval_and_the_note_says_why(report):
    groups = {(g["backbone"], g["row"]): g for g in _csv(report / "groups.csv")}
    # D-Ens, one number: its bootstrap interval; every sample right at confidence
    # 0.8, so each resample's dL2CE is 0.2 and so is the interval
    dens = groups[("resnet50", "dens")]
    assert float(dens["dl2ce_mean"]) == pytest.approx(0.2, abs=1e-12)
    assert (float(dens["dl2ce_ci_lo"]), float(dens["dl2ce_ci_hi"])) == pytest.approx(
        (0.2, 0.2), abs=1e-12)
    md = (report / "tables" / "toy_std.md").read_text()
    assert "test samples (ACC, ECE, NLL, dL2CE)" in md
    assert "biased upwards near perfect calibration" in md and "0 of 200" in md
    tex = (report / "tables" / "toy_std.tex").read_text()
    assert "biased upwards near perfect calibration" in tex
