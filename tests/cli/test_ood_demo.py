"""`bench data ood-demo --out DIR`: the offline demo's OOD set, tiles of
scikit-learn's two sample photos (bench.datasets.ood_demo)."""
import hashlib
import os

import numpy as np
import pytest
from PIL import Image

from bench.cli.main import main
from bench.datasets import ood_demo


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


def test_writes_80_png_tiles_of_both_photos_deterministically(tmp_path, capsys):
    from sklearn.datasets import load_sample_images

    out = tmp_path / "photos"
    assert main(["data", "ood-demo", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith(f"in {out}: 80 written, 0 unchanged") and "china.jpg" in line
    files = sorted(out.iterdir())
    assert len(files) == 80 and all(p.suffix == ".png" for p in files)
    assert {p.name.split("-")[0] for p in files} == {"china", "flower"}
    # each file is its grid square of the photo, pixel for pixel (PNG: lossless)
    photos = dict(zip(("china", "flower"), load_sample_images().images))
    img = np.asarray(Image.open(out / "flower-r2c5.png"))
    assert img.shape == (80, 80, 3) and img.dtype == np.uint8
    np.testing.assert_array_equal(img, photos["flower"][160:240, 400:480])
    np.testing.assert_array_equal(np.asarray(Image.open(out / "china-r4c7.png")),
                                  photos["china"][320:400, 560:640])
    first = _digest(out)
    mtimes = {p.name: p.stat().st_mtime_ns for p in files}
    # a second call writes nothing: same bytes, files untouched
    assert main(["data", "ood-demo", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("0 written, 80 unchanged")
    assert _digest(out) == first
    assert {p.name: p.stat().st_mtime_ns for p in sorted(out.iterdir())} == mtimes
    # another folder gets the same bytes; a changed tile is put back
    assert main(["data", "ood-demo", "--out", str(tmp_path / "again")]) == 0
    assert _digest(tmp_path / "again") == first
    (out / "china-r0c0.png").write_bytes(b"not a png")
    assert main(["data", "ood-demo", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("1 written, 79 unchanged")
    assert _digest(out) == first
    assert len(ood_demo.tiles(100)) == 2 * 4 * 6  # --tile: the grid follows


def test_written_folder_is_an_ood_source(tmp_path):
    """What run_all.sh passes to --eval ood:DIR: read as a folder of images."""
    from bench.core.evalfiles import EvalSpec
    from bench.datasets.evalsets import load_eval

    out = tmp_path / "sklearn-photos"
    ood_demo.write(out)
    spec = EvalSpec.parse(f"ood:{out}")
    data = load_eval(spec, "digits", 16, [str(d) for d in range(10)], progress=False)
    assert spec.name == "ood-sklearn-photos"
    assert data.images.shape == (80, 16, 16, 3) and data.labels is None


@pytest.mark.parametrize("bad, why", [
    ("", "--out '': empty path"),
    ("/proc/photos", "--out /proc/photos: is under /proc, a kernel filesystem"),
    ("FILE", "is a file, not a folder"),
    ("FILE/sub", "cannot be created: "),
])
def test_bad_out_is_one_line_exit_2_nothing_written(tmp_path, capsys, bad, why):
    (tmp_path / "FILE").write_text("x")
    bad = bad.replace("FILE", str(tmp_path / "FILE"))
    before = sorted(os.listdir(tmp_path))
    assert main(["data", "ood-demo", "--out", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why in err, err
    assert sorted(os.listdir(tmp_path)) == before


def test_bad_tile_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    assert main(["data", "ood-demo", "--out", str(tmp_path / "o"), "--tile", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tile 4: give whole pixels from 8 to 427" in err
    assert not (tmp_path / "o").exists()
