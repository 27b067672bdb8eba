"""Issue 39, point 6 and the post-hoc table's smaller points: every number's
computation is said where it is shown. The test reads a report's Markdown
tables as a reader would, finds every row label shown with two numbers in
one column (the TS / post-hoc tables' un-scaled multi-head rows against the
main table's), and fails unless the table showing the second number says
why; the LaTeX tables carry the same footnotes."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main


HEADS = {"sl1h": 1, "4hml": 4}  # a single-head and a multi-head method
K, N = 4, 60


def write_runs(root):
    """Records whose metrics.json holds what the trainer would store for
    their logits (bench.calib.measures.stored_values of the mean head softmax),
    so a main-table number is the plain prediction's, as in a real report."""
    from bench.calib import measures
    from bench.core import store
    from bench.calib.metrics import head_probs

    for method, heads in HEADS.items():
        for seed in range(3):
            rng = np.random.default_rng(10 * seed + heads)
            split = {}
            for name in ("val", "test"):
                y = np.arange(N) % K
                z = rng.normal(0, 1, (N, heads, K)) + 2.5 * np.eye(K)[y][:, None, :] \
                    + rng.normal(0, 1.5, (N, heads, 1)) * np.eye(K)[(y + 1) % K][:, None, :]
                split[f"{name}_logits"], split[f"{name}_labels"] = (3 * z).astype(np.float32), y
            metrics = {s: measures.stored_values(head_probs(split[f"{s}_logits"]),
                                                 split[f"{s}_labels"]) for s in ("val", "test")}
            config = {"dataset": "toy", "backbone": "resnet50", "method": method,
                      "seed": seed, "heads": heads}
            store.write_record(store.record_dir(root, "toy", "resnet50", method, "abc", seed),
                               config, metrics, split)
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = write_runs(tmp_path_factory.mktemp("runs"))
    out = tmp_path_factory.mktemp("rep")
    assert main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--variants", "vs,dirichlet,hb,iso,ets"]) == 0
    return out


def _number(text: str) -> float | None:
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None  # a ditto mark, '--'


def read_tables(path) -> tuple[dict, str]:
    """(label -> {(block, head): number}, the text after the table) of a
    report's Markdown table; a block is a backbone, opened by 'NAME HEAD'."""
    lines = path.read_text().splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    heads = [c.strip() for c in table[0].strip("|").split("|")][1:]
    keys, block = [], ""
    for h in heads:
        if " " in h:
            block, h = h.rsplit(" ", 1)
        keys.append((block, h))
    rows = {}
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = {k: _number(v) for k, v in zip(keys, cells[1:]) if not k[1].startswith("Rank")}
    return rows, "\n".join(ln for ln in lines if not ln.startswith("|"))


def test_point6_every_label_shown_with_two_numbers_is_explained(report):
    main_rows, _ = read_tables(report / "tables" / "toy_main.md")
    twice = []
    for kind in ("ts", "posthoc"):
        rows, notes = read_tables(report / "tables" / f"toy_{kind}.md")
        for label, values in rows.items():
            for col, value in values.items():
                first = main_rows.get(label, {}).get(col)
                if first is not None and value is not None and abs(first - value) > 1e-9:
                    twice.append((kind, label, col))
                    assert "main table" in notes and "logits averaged" in notes and \
                        "probabilities" in notes, (kind, label, col)
    # the check has something to check: the multi-head rows differ, single heads do not
    assert {label for _, label, _ in twice} == {"4HML"}
    for kind in ("ts", "posthoc"):
        tex = (report / "tables" / f"toy_{kind}.tex").read_text()
        assert "the main table averages" in tex and "logits averaged" in tex


def test_posthoc_footnote_names_each_calibrator_and_how_zero_probabilities_enter_nll(report):
    _, md = read_tables(report / "tables" / "toy_posthoc.md")
    for text in ("+VS: vector scaling", "+Dirichlet: Dirichlet calibration",
                 "lambda = mu chosen by 5-fold cross-validation", "+HB: histogram binning",
                 "15 equal-mass bins", "+ISO: isotonic regression",
                 "+ETS: ensemble temperature scaling", "fitted on its run's validation split",
                 "p_y = 0", f"{-np.log(np.finfo(np.float32).eps):.2f}"):
        assert text in md, text
    tex = (report / "tables" / "toy_posthoc.tex").read_text()
    assert "+Dirichlet: Dirichlet calibration" in tex and "15.94" in tex
