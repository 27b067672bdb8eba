"""`bench report`'s extra measures, intervals, --metrics and --ci on known
records: numbers against independent implementations (torchmetrics,
uncertainty-calibration, relplot, scipy) and hand-worked values; the default
tables byte-identical to those made before the measures existed."""
import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from report_records import KNOWN, write_known
from scipy import stats as sps
from torchmetrics.classification import MulticlassCalibrationError

import bench.results
from bench.cli.main import main
from bench.core import store
from bench.calib import measures as M
from bench.calib import variants as V
from bench.core.record import Record

GOLDEN = Path(__file__).parent / "golden_default"
ALL = "ece,aece,cwece,smece,brier,aurc"
EXTRA = [m for m in M.names() if m not in M.stored()]  # computed from the logits


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_known(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def full(records, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    assert main(["report", "--results", str(records), "--out", str(out), "--no-plots",
                 "--no-progress", "--metrics", ALL, "--ci"]) == 0
    return out


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def _probs(path):
    z = torch.from_numpy(store.load_predictions(path)["test_logits"]).double()
    return torch.softmax(z, -1).mean(1).numpy(), store.load_predictions(path)["test_labels"]


@pytest.mark.parametrize("extra", [[], ["--metrics", "ece,nll"]])
def test_default_tables_are_byte_identical_to_before(records, tmp_path, extra):
    assert main(["report", "--results", str(records), "--out", str(tmp_path), "--no-plots",
                 "--no-progress", *extra]) == 0
    for golden in sorted(GOLDEN.iterdir()):
        assert (tmp_path / "tables" / golden.name).read_bytes() == golden.read_bytes(), golden.name


def test_runs_csv_measures_match_independent_implementations(full):
    import calibration
    import relplot

    rows = _csv(full / "runs.csv")
    assert len(rows) == sum(len(v["acc"]) for v in KNOWN.values())
    row = next(r for r in rows if (r["backbone"], r["method"], r["seed"]) == ("resnet50", "4hml", "1"))
    probs, labels = _probs(Path(row["path"]))
    for n in (5, 10, 15, 20, 30):
        tm = MulticlassCalibrationError(num_classes=probs.shape[1], n_bins=n, norm="l1")
        assert float(row[f"ece{n}"]) == pytest.approx(
            float(tm(torch.from_numpy(probs.astype(np.float32)), torch.from_numpy(labels))),
            abs=1e-6)
    assert float(row["aece"]) == pytest.approx(calibration.get_ece_em(probs, labels, num_bins=15),
                                               abs=1e-6)
    conf, right = probs.max(1), (probs.argmax(1) == labels).astype(float)
    assert float(row["smece"]) == pytest.approx(relplot.smECE(conf, right), abs=1e-6)
    assert float(row["dl2ce"]) == pytest.approx(
        calibration.get_top_calibration_error(probs, labels, p=2, debias=True), abs=1e-6)
    # the bootstrap of ACC, redone with numpy: resample rows, percentile interval
    idx = np.random.default_rng(int(row["boot_seed"])).integers(
        0, len(labels), size=(int(row["boot_resamples"]), len(labels)))
    assert (int(row["boot_resamples"]), int(row["boot_seed"])) == (1000, 0)
    accs = right[idx].mean(1)
    assert float(row["acc_boot_lo"]) == pytest.approx(np.percentile(accs, 2.5))
    assert float(row["acc_boot_hi"]) == pytest.approx(np.percentile(accs, 97.5))


def test_derived_rows_get_the_measures_by_hand(full):
    """The sl1h test predictions are p = 0.8 on class 0 for every sample,
    all of class 0: the D-Ens (and each sl1h seed) is right everywhere at
    confidence 0.8: every top-label ECE is 0.2, AURC 0, and the classwise ECE
    (0.2 + 3 x 0.2/3) / 4 = 0.1."""
    rows = {(r["backbone"], r["row"]): r for r in _csv(full / "groups.csv")}
    for key in (("resnet50", "dens"), ("resnet50", "sl1h"), ("convnext_tiny", "dens")):
        g = rows[key]
        for m in ("aece", "smece", "dl2ce", "ece5", "ece15", "ece30"):
            assert float(g[f"{m}_mean"]) == pytest.approx(0.2, abs=2e-3), (key, m)
        assert float(g["cwece_mean"]) == pytest.approx(0.1, abs=1e-6)
        assert float(g["aurc_mean"]) == 0.0
    assert rows[("resnet50", "dens")]["aece_std"] == ""  # one number
    for key in (("resnet50", "sl1h+ts"), ("resnet50", "sl1h@ts-base"), ("resnet50", "4hml+ts")):
        assert rows[key]["aece_mean"] != "" and rows[key]["smece_mean"] != ""


def test_ts_rows_measures_are_those_of_the_scaled_logits(full, records):
    import calibration

    from variantutil import temperature_scaled

    rows = {(r["backbone"], r["row"]): r for r in _csv(full / "groups.csv")}
    values = []
    for seed in range(3):
        path = store.record_dir(records, "toy", "resnet50", "2hml", "abc123", seed)
        t = temperature_scaled(path)["temperature"]
        p = store.load_predictions(path)
        z = torch.from_numpy(p["test_logits"]).double().mean(1) / t
        values.append(calibration.get_ece_em(torch.softmax(z, -1).numpy(), p["test_labels"],
                                             num_bins=15))
    assert float(rows[("resnet50", "2hml+ts")]["aece_mean"]) == pytest.approx(np.mean(values),
                                                                             abs=1e-6)


def test_cell_intervals_over_seeds_are_students_t(full):
    rows = {(r["backbone"], r["row"]): r for r in _csv(full / "groups.csv")}
    g = rows[("resnet50", "sl1h")]
    acc = np.array(KNOWN[("resnet50", "sl1h")]["acc"]) / 100
    lo, hi = sps.t.interval(0.95, len(acc) - 1, loc=acc.mean(), scale=sps.sem(acc))
    assert (float(g["acc_ci_lo"]), float(g["acc_ci_hi"])) == pytest.approx((lo, hi))
    dens = rows[("resnet50", "dens")]  # one number: the bootstrap over test samples
    assert (float(dens["acc_ci_lo"]), float(dens["acc_ci_hi"])) == (1.0, 1.0)
    assert float(dens["ece_ci_lo"]) == pytest.approx(0.2, abs=1e-6)


def _md_rows(path):
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    return head, body


def test_rank_averages_the_columns_shown(full):
    head, body = _md_rows(full / "tables" / "toy_main.md")
    assert head[1:10] == ["ResNet50 ACC↑", "ECE↓", "Gap", "aECE↓", "cwECE↓", "smECE↓", "Brier↓",
                          "AURC↓", "Rank↓"]
    for block in (1, 10):
        num = lambda cell: float(cell.split()[0])  # noqa: E731
        ranks = []
        for col in (block, block + 1, *range(block + 3, block + 8)):  # Gap is not ranked
            vals = np.array([num(r[col]) for r in body])
            ranks.append(sps.rankdata(-vals if col == block else vals, method="ordinal"))
        expected = np.mean(ranks, axis=0)
        got = [float(r[block + 8].strip("*_ ")) for r in body]
        assert got == pytest.approx(np.round(expected, 1), abs=0.051)
    text = (full / "tables" / "toy_main.md").read_text()
    assert "Rank: mean of the per-column ranks over ACC, ECE, aECE, cwECE, smECE, Brier, AURC" in text


def test_ci_replaces_std_in_the_std_table(full):
    head, body = _md_rows(full / "tables" / "toy_std.md")
    sl1h = next(r for r in body if r[0] == "SL1H")
    assert sl1h[1] == "81.00 [78.52, 83.48]"  # 81 +- t(0.975, 2) * 1 / sqrt(3)
    assert "95% interval of the mean over seeds" in (full / "tables" / "toy_std.md").read_text()
    assert "[" not in (full / "tables" / "toy_main.md").read_text().split("\n\n")[0]


def test_measures_are_cached_and_recomputed_when_a_record_changes(records, tmp_path, monkeypatch):
    import shutil

    results = tmp_path / "results"
    shutil.copytree(records, results)
    calls = []
    real = V.Variant.apply
    monkeypatch.setattr(V.Variant, "apply",
                        lambda self, p: calls.append((self.name, p["test_logits"].sum())) or
                        real(self, p))
    args = ["report", "--results", str(results), "--out", str(tmp_path / "out"), "--no-plots",
            "--no-progress", "--method", "ls"]
    assert main(args) == 0  # 5 records x plain, ts-base, ts
    assert len(calls) == 15 and (tmp_path / "out" / "cache" / "measures.json").is_file()
    first = (tmp_path / "out" / "runs.csv").read_bytes()
    calls.clear()
    assert main(args) == 0
    assert calls == [] and (tmp_path / "out" / "runs.csv").read_bytes() == first
    changed = store.record_dir(results, "toy", "resnet50", "ls", "abc123", 1)
    rec = Record(changed, results)
    arrays = {**rec.predictions, "test_logits": rec.predictions["test_logits"] * 2}
    store.write_record(changed, rec.config, rec.metrics, arrays)  # a new checksum
    assert main(args) == 0
    assert sorted(n for n, _ in calls) == ["plain", "ts", "ts-base"]


def test_bad_metrics_is_one_line_before_anything_is_written(records, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", "--results", str(records), "--out", str(out), "--metrics",
                 "ece,foo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--metrics 'ece,foo': unknown foo; allowed: ece, nll," in err
    assert not out.exists()


def test_results_load_has_every_measure(records):
    df = bench.results.load(records)
    for m in (*EXTRA, "acc_boot_lo", "nll_boot_hi"):
        assert df[m].notna().all(), m
    row = df[(df.backbone == "resnet50") & (df.method == "2hml") & (df.seed == 0)].iloc[0]
    probs, labels = _probs(Path(row.path))
    tm = MulticlassCalibrationError(num_classes=probs.shape[1], n_bins=15, norm="l1")
    assert row.ece15 == pytest.approx(float(tm(torch.from_numpy(probs.astype(np.float32)),
                                                    torch.from_numpy(labels))), abs=1e-6)
    assert "aece" not in bench.results.load(records, measures=False)


def test_records_without_checksums_get_every_measure_and_interval(records, tmp_path):
    """Records written before checksums (and before these measures) existed:
    the report still computes every measure and interval, keyed on the file."""
    import json
    import shutil

    old = tmp_path / "old"
    shutil.copytree(records, old)
    for m in old.glob("toy/*/*/*/seed*/metrics.json"):
        obj = json.loads(m.read_text())
        obj.pop("files", None)
        obj.pop("digest", None)  # as old versions wrote it: neither checksums nor a digest
        m.write_text(json.dumps(obj))
    out = tmp_path / "out"
    assert main(["report", "--results", str(old), "--out", str(out), "--no-plots",
                 "--no-progress", "--metrics", ALL, "--ci"]) == 0
    rows = _csv(out / "runs.csv")
    assert all(r[m] != "" for r in rows for m in (*EXTRA, "ece_boot_lo"))
    digest = Record(Path(rows[0]["path"])).digest  # no checksum: size and mtime
    assert len(digest.split(":")) == 2 and all(p.isdigit() for p in digest.split(":"))
    groups = _csv(out / "groups.csv")
    assert all(g["acc_ci_lo"] != "" for g in groups if g["variant"] in ("seeds", "dens")
               and int(g["n"]) > 1 or g["variant"] == "dens")


def test_metrics_and_ci_tables_compile_with_pdflatex(full, tmp_path):
    """The --metrics/--ci tables and their notes (one starts with "[") compile."""
    import shutil
    import subprocess

    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    work = tmp_path / "tex"
    shutil.copytree(full / "tables", work)
    assert "[lo, hi]" in (work / "toy_std.tex").read_text()
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                          "all_tables.tex"], cwd=work, capture_output=True, text=True, timeout=120)
    errors = [ln for ln in res.stdout.splitlines() if ln.startswith("!")]
    assert res.returncode == 0 and not errors, errors or res.stdout[-2000:]
