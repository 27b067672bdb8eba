"""A missing `--eval` source is caught before anything is built or written.

Observed: `bench run ... --eval shift --eval ood:pathmnist` without
pathmnist.npz spent minutes corrupting the run's test split and only then
failed. Every ood/site source is now checked with the plan's other checks
(bench.sweep.evals.check_source / check_sizes -> bench.datasets.evalsets.
check_present): one line naming the source and what is missing, exit 2, no
corrupted set built, no folder made anywhere (the whole tree the command can
reach compared before and after, as tests/sweep/test_dry_run_writes_nothing)."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cli.main import main
from bench.datasets import medmnist, shift
from test_eval_runs import TINY, image_folder, one_line


def _tree(root) -> dict:
    return {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0,
                                       p.stat().st_mtime_ns) for p in root.rglob("*")}


def _npz(path, size: int = 28):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for split in ("train", "val", "test"):
        arrays[f"{split}_images"] = rng.integers(0, 255, (9, size, size, 3), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(9) % 9).astype(np.uint8).reshape(9, 1)
    np.savez_compressed(path, **arrays)


def _kvasir_without_one_test_image(data):
    from tests.datasets.test_datasets import write_kvasir  # the official layout

    from bench.datasets.filelist import FILE_INDEXES

    write_kvasir(data / "hyper-kvasir" / "labeled-images", per_class=(5, 5, 5, 5))
    gone = FILE_INDEXES.get("kvasir")(data / "hyper-kvasir" / "labeled-images").paths["test"][0]
    __import__("os").remove(gone)
    return gone


# (--eval value as a template, what the world holds, words the line must have)
CASES = {
    "medmnist file absent": ("ood:pathmnist", None, "pathmnist.npz not found"),
    "medmnist file at another size": ("ood:pathmnist", "npz64", "pathmnist.npz not found"),
    "file dataset folder absent": ("ood:chaoyang", None, "is not a directory"),
    "file dataset test image absent": ("ood:kvasir", "kvasir", "of kvasir are missing"),
    "empty folder": ("ood:{tmp}/empty", "empty", "no images"),
    "site folder without class folders": ("site:{tmp}/flat", "flat", "no class folder"),
    "csv listing an absent image": ("site:{tmp}/site.csv", "csv", "listed images are missing"),
    "csv without its column": ("ood:{tmp}/bad.csv", "badcsv", "missing column"),
}


# bench eval checks a source's size against its records' test sizes: with no
# record it has no size to check (tests/cli/test_shift_ood_flow.py has records)
@pytest.mark.parametrize("command, case", [(c, k) for c in ("run", "eval") for k in CASES
                                           if (c, k) != ("eval", "medmnist file at another size")])
def test_a_missing_source_is_one_line_before_anything_is_built(case, command, tmp_path,
                                                                monkeypatch, capsys):
    template, world, words = CASES[case]
    data, results = tmp_path / "data", tmp_path / "runs"
    data.mkdir()
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(medmnist, "LEGACY_ROOT", tmp_path / "no-legacy")
    if world == "npz64":
        _npz(data / "medmnist" / "pathmnist_64.npz", 64)
    elif world == "kvasir":
        _kvasir_without_one_test_image(data)
    elif world == "empty":
        (tmp_path / "empty").mkdir()
    elif world == "flat":
        image_folder(tmp_path / "flat", 2, 0)  # images, but no class folders
    elif world == "csv":
        image_folder(tmp_path / "imgs", 1, 0)
        (tmp_path / "site.csv").write_text("image,label\nimgs/0.png,0\nimgs/9.png,1\n")
    elif world == "badcsv":
        (tmp_path / "bad.csv").write_text("path\nx.png\n")
    if command == "eval":
        results.mkdir()

    def never(*a, **k):
        raise AssertionError("a corrupted set was built before the sources were checked")

    monkeypatch.setattr(shift, "get", never)
    value = template.format(tmp=tmp_path)
    before = _tree(tmp_path)
    argv = (["run", *TINY, "--results", str(results), "--keep-weights"] if command == "run"
            else ["eval", "--results", str(results), "--no-progress"])
    capsys.readouterr()
    assert main([*argv, "--eval", "shift", "--eval", value]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"--eval {value}" in line and words in line, line
    assert _tree(tmp_path) == before, sorted(set(_tree(tmp_path)) ^ set(before))


def test_a_present_source_passes_the_check(tmp_path, monkeypatch):
    """The same checks on sources that are there: nothing raised, nothing written."""
    from bench.core.evalfiles import parse_all
    from bench.datasets.evalsets import check_present

    data = tmp_path / "data"
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data))
    monkeypatch.setattr(medmnist, "LEGACY_ROOT", tmp_path / "no-legacy")
    _npz(data / "medmnist" / "pathmnist.npz")
    image_folder(tmp_path / "site" / "a", 2, 0)
    (tmp_path / "list.csv").write_text("image\nsite/a/0.png\n")
    before = _tree(tmp_path)
    for spec in parse_all(["ood:pathmnist", f"site:{tmp_path}/site", f"ood:{tmp_path}/list.csv",
                           "ood:digits"]):
        check_present(spec)
        check_present(spec, 16)
    assert _tree(tmp_path) == before
