"""The LaTeX tables, digit by digit, from records with known metric values,
and every generated .tex compiled with pdflatex."""
import re
import shutil
import statistics
import subprocess

import numpy as np
import pytest
from report_records import DENS, KNOWN, write_known
from sklearn.metrics import log_loss

from bench.core import store
from bench.cli.main import main
from variantutil import temperature_scaled

BACKBONES = ("resnet50", "convnext_tiny")  # the paper's column order
ROWS = ("sl1h", "ls", "dens", "2hml", "4hml")
LABELS = {"sl1h": "SL1H", "ls": "LS", "dens": "D-Ens", "2hml": "2HML", "4hml": "4HML"}
# Hand-worked in tests/report_records.py's values (rank = mean of ACC/ECE/NLL ranks):
# ResNet50: ACC D-Ens 1, 2HML 2 (tie with 4HML, listed first), 4HML 3, SL1H 4, LS 5;
#           ECE 4HML, LS, 2HML, SL1H, D-Ens; NLL D-Ens, 4HML, 2HML, SL1H, LS.
# ConvNeXt: ACC D-Ens, 2HML, SL1H, 4HML, LS; ECE LS, 4HML, 2HML, SL1H, D-Ens;
#           NLL D-Ens, 4HML, 2HML, SL1H, LS.
RANKS = {"resnet50": {"sl1h": "4.0", "ls": "4.0", "dens": r"\textbf{2.3}", "2hml": "2.7",
                      "4hml": r"\underline{\textbf{2.0}}"},
         "convnext_tiny": {"sl1h": "3.7", "ls": "3.7", "dens": r"\underline{\textbf{2.3}}",
                           "2hml": r"\textbf{2.7}", "4hml": r"\textbf{2.7}"}}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_known(root)
    out = tmp_path_factory.mktemp("reports")
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress"]) == 0
    return root, out


def body_rows(tex: str) -> list[tuple[str, list[str]]]:
    rows = []
    for line in tex.splitlines():
        m = re.match(r"\\textbf\{([^}]*)\} & (.*) \\\\$", line)
        if m:
            rows.append((m.group(1), m.group(2).split(" & ")))
    return rows


def expected_cell(method, backbone, metric, with_std):
    if method == "dens":
        return f"{DENS[metric]:.2f}"
    values = KNOWN[(backbone, method)][metric]
    text = f"{statistics.fmean(values):.2f}"
    if with_std:
        text += f"$\\pm${statistics.pstdev(values):.2f}"
    if metric == "acc" and len(values) < 3:
        text += f"$^{{{len(values)}/3}}$"
    return text


@pytest.mark.parametrize("kind", ["main", "std"])
def test_every_number_rank_and_mark(report, kind):
    tex = (report[1] / "tables" / f"toy_{kind}.tex").read_text()
    rows = body_rows(tex)
    assert [label for label, _ in rows] == [LABELS[m] for m in ROWS]
    for (label, cells), method in zip(rows, ROWS):
        assert len(cells) == 10
        for b, block in zip(BACKBONES, (cells[:5], cells[5:])):
            want = [expected_cell(method, b, m, kind == "std") for m in ("acc", "ece", "nll")]
            # write_known: gap -0.05 per seed; D-Ens: confidence 0.8, accuracy 1
            gap = "$-20.00$" if method == "dens" else "$-5.00$"
            assert block == want[:2] + [gap, want[2], RANKS[b][method]], (label, b)
    assert r"\multicolumn{5}{c}{\textbf{ResNet50}} & \multicolumn{5}{c}{\textbf{ConvNeXt}}" in tex
    assert r"\cmidrule(lr){2-6} \cmidrule(lr){7-11}" in tex
    assert (r"ACC$^\uparrow$ & ECE$_\downarrow$ & Gap & NLL$_\downarrow$ & Rank$_\downarrow$"
            in tex)  # the signed gap, as in the Markdown
    assert ("sidewaystable" in tex) == (kind == "std")


def test_dens_between_double_rules_and_footnote(report):
    tex = (report[1] / "tables" / "toy_main.tex").read_text()
    between = re.findall(r"\\\\\n((?:\\midrule\n?)+)\\textbf", tex)
    # header | SL1H | LS || D-Ens || 2HML | 4HML
    assert [b.count(r"\midrule") for b in between] == [1, 1, 2, 2, 1]
    assert "mean over only $n$ of the $N$ seeds asked: LS / ConvNeXt: 2 of 3 seeds (missing 2)" in tex
    assert tex.index(r"\toprule") < tex.index(r"\midrule") < tex.index(r"\bottomrule")


def _probs_logit_mean(z, t=1.0):
    zm = z.astype(np.float64).mean(axis=1) / t
    e = np.exp(zm - zm.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _ece(probs, labels):
    from torchmetrics.functional.classification import multiclass_calibration_error
    import torch
    return float(multiclass_calibration_error(torch.tensor(probs), torch.tensor(labels),
                                              num_classes=probs.shape[1], n_bins=15))


def _ts_expected(root, backbone, method):
    """(base, +TS) means over seeds, x100, computed without bench.calib.measures."""
    base, scaled = [], []
    for path in sorted((root / "toy" / backbone / method / "abc123").glob("seed*")):
        p = store.load_predictions(path)
        t = temperature_scaled(path)["temperature"]
        for out, temp in ((base, 1.0), (scaled, t)):
            q = _probs_logit_mean(p["test_logits"], temp)
            y = p["test_labels"]
            out.append([np.mean(q.argmax(1) == y), _ece(q, y),
                        log_loss(y, q, labels=list(range(q.shape[1])))])
    return np.mean(base, axis=0) * 100, np.mean(scaled, axis=0) * 100


def _brute_ranks(rows):
    """Rank of row i on one metric = 1 + #better + #equal listed before i."""
    out = []
    for i, r in enumerate(rows):
        per = []
        for k, higher in ((0, True), (1, False), (2, False)):
            better = sum((o[k] > r[k]) if higher else (o[k] < r[k]) for o in rows)
            per.append(1 + better + sum(o[k] == r[k] for o in rows[:i]))
        out.append(sum(per) / 3)
    return out


def test_ts_table_numbers_ditto_and_ranks(report):
    root, out = report
    tex = (out / "tables" / "toy_ts.tex").read_text()
    rows = body_rows(tex)
    # The paper's TS tables show SL1H, 2HSL and 4HML only (LS and 2HML of the
    # toy records are left out unless --order names them).
    methods = ("sl1h", "4hml")
    assert [label for label, _ in rows] == [x for m in methods for x in (LABELS[m], "+TS")]
    assert tex.count(r"\midrule[1.15pt]") == 2  # after the header and between the 2 pairs
    for bi, b in enumerate(BACKBONES):
        printed = []
        for m in methods:
            base, scaled = _ts_expected(root, b, m)
            printed += [[round(v, 2) for v in base], [round(base[0], 2)] + [round(v, 2) for v in scaled[1:]]]
        ranks = _brute_ranks(printed)
        best = min(ranks)
        second = min(r for r in ranks if r > best)
        for j, (label, cells) in enumerate(rows):
            block = cells[5 * bi: 5 * bi + 5]
            del block[2]  # the signed gap (checked in test_every_number_rank_and_mark)
            acc = re.sub(r"\$\^\{[^}]*\}\$", "", block[0])
            if label == "+TS":
                assert block[0] == "''"  # ditto: TS never changes the accuracy
            else:
                assert acc == f"{printed[j][0]:.2f}"
            assert block[1:3] == [f"{printed[j][1]:.2f}", f"{printed[j][2]:.2f}"]
            text = f"{ranks[j]:.1f}"
            mark = (rf"\underline{{\textbf{{{text}}}}}" if ranks[j] == best
                    else rf"\textbf{{{text}}}" if ranks[j] == second else text)
            assert block[3] == mark, (b, label, j)


def test_wrappers_compile_with_pdflatex(report, tmp_path):
    """Every generated .tex (fragments through their wrappers) compiles."""
    assert shutil.which("pdflatex"), ("pdflatex missing: ./setup.sh installs "
                                      "texlive-latex-recommended (needs apt-get)")
    tables = report[1] / "tables"
    work = tmp_path / "tex"
    shutil.copytree(tables, work)
    fragments = {p.stem for p in work.glob("*.tex") if not p.stem.endswith("_doc")} - {"all_tables"}
    wrappers = sorted(work.glob("*_doc.tex")) + [work / "all_tables.tex"]
    assert {w.stem.removesuffix("_doc") for w in wrappers[:-1]} == fragments
    for w in wrappers:
        res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", w.name],
                             cwd=work, capture_output=True, text=True, timeout=120)
        errors = [ln for ln in res.stdout.splitlines() if ln.startswith("!")]
        assert res.returncode == 0 and not errors, f"{w.name}: {errors or res.stdout[-2000:]}"
        assert (work / f"{w.stem}.pdf").stat().st_size > 1000


def test_order_sections_and_caption_are_configurable(report):
    from bench.report.numbers import aggregate
    from bench.report.render import latex
    from bench.report.render.tables import TableSpec, build_table

    runs = aggregate.load_runs(report[0])
    groups, _ = aggregate.build_cells(runs, with_ts=False)
    spec = TableSpec("main", sections=(("4hml", "sl1h"), ("ls",)),
                     caption=r"My {dataset} table over {n} seeds")
    t = build_table(spec, "toy", groups, (0, 1, 2))
    tex = latex.fragment(t)
    # an explicit order shows exactly the methods it names
    assert [label for label, _ in body_rows(tex)] == ["4HML", "SL1H", "LS"]
    assert r"\textbf{SL1H}" in tex.split("\\midrule\n\\midrule")[0]
    assert r"\caption{My toy table over 3 seeds}" in tex  # 'toy' has no display name


def test_a_backbone_without_runs_shows_dashes_and_a_footnote(report):
    from bench.report.numbers import aggregate
    from bench.report.render import latex
    from bench.report.render.tables import build_table

    runs = [r for r in aggregate.load_runs(report[0])
            if (r.backbone, r.method) != ("convnext_tiny", "4hml")]
    groups, _ = aggregate.build_cells(runs, with_ts=False)
    tex = latex.fragment(build_table("main", "toy", groups, (0, 1, 2)))
    cells = dict(body_rows(tex))["4HML"]
    assert cells[5:] == ["--"] * 5 and cells[4] == r"\underline{\textbf{2.0}}"
    assert "--: no finished run for that backbone." in tex
