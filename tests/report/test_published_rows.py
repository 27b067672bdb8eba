"""`bench report --published-rows`: the paper's published rows beside re-run
ones, marked as copied, ranked with them, never mixed with a re-run row of
the same method."""
import csv
from pathlib import Path

import numpy as np
from report_records import write_known

from bench.cli.main import main
from bench.core import store
from bench.core.config import PROFILES
from bench.core.settings import hashed

PUBLISHED = Path(__file__).resolve().parents[2] / "bench" / "report" / "paper" / "published.csv"


def paper(table: str, backbone: str) -> dict:
    """method -> the printed row, read straight from the shipped CSV."""
    with open(PUBLISHED) as f:
        return {r["method"]: r for r in csv.DictReader(f)
                if r["table"] == table and r["backbone"] == backbone and not r["variant"]}


def md_rows(path) -> dict:
    lines = [ln for ln in path.read_text().splitlines()[2:] if ln.startswith("|")]
    return {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]] for ln in lines}


def report(root, out, *extra):
    return main(["report", "--results", str(root), "--out", str(out), "--no-plots",
                 "--no-progress", "--published-rows", *extra])


def paper_protocol(method: str) -> dict:
    """config.json fields of a Chaoyang run trained as the published ones
    (bench.report.paper.comparable checks them): the paper profile, 224 px (LS:
    trained at 150, docs/fidelity.md), the published split sizes."""
    size = 150 if method == "ls" else 224
    train = {**hashed(PROFILES["paper"]), "augment_size": size, "image_size": size,
             "test_size": 224}
    return {"train": train, "split_sizes": {"train": 3217, "val": 804, "test": 2139}}


def as_paper(root: Path) -> Path:
    """write_known's records, each config given the paper's protocol."""
    for path in sorted(root.glob("chaoyang/*/*/abc123/seed*")):
        config = store.read_json(path / "config.json")
        p = store.load_predictions(path)
        store.write_record(path, {**config, **paper_protocol(config["method"])},
                           store.read_json(path / "metrics.json"),
                           {k: p[k] for k in ("val_logits", "val_labels", "test_logits",
                                              "test_labels")})
    return root


def test_copied_rows_rank_as_the_paper_printed_them(tmp_path):
    """One re-run SL1H seed with exactly the paper's numbers: the table is the
    paper's Chaoyang ResNet50 block, and every Rank is the one it printed."""
    row = paper("chaoyang", "resnet50")
    test = {m: float(row["sl1h"][m]) / 100 for m in ("acc", "ece", "nll")}
    z = np.zeros((8, 1, 2), np.float32)
    y = np.zeros(8, np.int64)
    path = store.record_dir(tmp_path / "r", "chaoyang", "resnet50", "sl1h", "abc123", 0)
    store.write_record(path, {"dataset": "chaoyang", "backbone": "resnet50", "method": "sl1h",
                              "seed": 0, "heads": 1, **paper_protocol("sl1h")},
                       {"test": test, "val": test},
                       {"val_logits": z, "val_labels": y, "test_logits": z, "test_labels": y})
    assert report(tmp_path / "r", tmp_path / "out", "--no-ts") == 0
    rows = md_rows(tmp_path / "out" / "tables" / "chaoyang_main.md")
    names = {"sl1h": "SL1H", "ls": "LS†", "mbls": "MbLS†", "mixup": "MixUp†", "dca": "DCA†",
             "dens": "D-Ens†", "2hsl": "2HSL†", "2hml": "2HML†", "4hml": "4HML†"}
    assert list(rows) == list(names.values())
    for method, label in names.items():
        acc, ece, gap, nll, rank = rows[label]
        assert (acc, ece, nll) == tuple(f"{float(row[method][m]):.2f}"
                                        for m in ("acc", "ece", "nll")), label
        assert float(rank.strip("*_ ")) == float(row[method]["rank"]), label
        # the paper printed no Gap; the re-run record's comes from its logits
        # (constant: confidence 0.5, every test image right)
        assert gap == ("--" if label.endswith("†") else "-50.00"), label
    md = (tmp_path / "out" / "tables" / "chaoyang_main.md").read_text()
    assert "†: copied from the paper (Galdran et al., MICCAI 2023), not re-run here" in md
    assert "Rank is computed over all rows shown" in md


def test_copied_rows_never_mix_with_rerun_rows_of_a_method(tmp_path, capsys):
    root = as_paper(write_known(tmp_path / "r", dataset="chaoyang"))  # sl1h, ls, 2hml, 4hml re-run
    out = tmp_path / "out"
    assert report(root, out) == 0
    main_rows = md_rows(out / "tables" / "chaoyang_main.md")
    assert list(main_rows) == ["SL1H", "LS", "MbLS†", "MixUp†", "DCA†", "D-Ens", "2HSL†",
                               "2HML", "4HML"]
    ts = list(md_rows(out / "tables" / "chaoyang_ts.md"))
    assert ts == ["SL1H", "SL1H+TS", "2HSL†", "2HSL+TS†", "4HML", "4HML+TS"]
    tex = (out / "tables" / "chaoyang_main.tex").read_text()
    assert r"\textbf{MbLS}$^\dagger$" in tex and "not re-run here" in tex
    assert "Swin-T" not in tex  # only the blocks that have records of their own
    with open(out / "groups.csv") as f:
        assert not [r for r in csv.DictReader(f) if "@paper" in r["row"]]
    # the copied row's numbers are the paper's, ResNet50 block
    pub = paper("chaoyang", "resnet50")
    assert main_rows["DCA†"][:2] == [f"{float(pub['dca']['acc']):.2f}",
                                     f"{float(pub['dca']['ece']):.2f}"]
    assert report(root, tmp_path / "off", "--method", "sl1h") == 0
    assert "LS†" in md_rows(tmp_path / "off" / "tables" / "chaoyang_main.md")
    capsys.readouterr()
    toy = write_known(tmp_path / "toy")  # not a dataset of the paper: nothing to add, said so
    assert report(toy, tmp_path / "toy_out") == 0
    assert "note: --published-rows added no row" in capsys.readouterr().out
    assert report(root, tmp_path / "bad", "--metrics", "aece") == 2
    assert "--published-rows with --metrics aece" in capsys.readouterr().err


def test_tables_with_copied_rows_labels_and_no_gap_compile_with_pdflatex(tmp_path):
    import shutil
    import subprocess

    assert shutil.which("pdflatex"), "pdflatex missing: ./setup.sh installs it"
    root = as_paper(write_known(tmp_path / "r", dataset="chaoyang"))
    out = tmp_path / "out"
    assert report(root, out, "--no-gap", "--label", "ls=LS & co_1 (ours)", "--significance",
                  "--significance-ref", "4hml") == 0
    tex = (out / "tables" / "chaoyang_main.tex").read_text()
    assert r"\textbf{LS \& co\_1 (ours)}" in tex and "Gap" not in tex
    res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                          "all_tables.tex"], cwd=out / "tables", capture_output=True, text=True,
                         timeout=120)
    errors = [ln for ln in res.stdout.splitlines() if ln.startswith("!")]
    assert res.returncode == 0 and not errors, errors or res.stdout[-2000:]
