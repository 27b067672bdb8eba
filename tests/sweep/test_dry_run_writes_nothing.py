"""Issue 35, point 8: `bench run --dry-run` writes nothing anywhere: no image
cache in the data folder, no lock, no results folder, nothing in HOME, the
working folder or TMPDIR. The whole tree the command could reach is compared
before and after (that a real run builds the cache: tests/datasets)."""
from __future__ import annotations

import os
import subprocess

import numpy as np
from PIL import Image

from sweeputil import bench_cmd


def _csv_dataset(root):
    """20 small PNGs of two classes and a CSV listing them (the csv adapter
    decodes them through the image cache a real run writes)."""
    rows = ["image,label"]
    for i in range(20):
        Image.fromarray(np.full((10, 10, 3), 10 * i, np.uint8)).save(root / f"{i}.png")
        rows.append(f"{i}.png,{'ab'[i % 2]}")
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    return root / "train.csv"


# torch._dynamo makes TMPDIR/torchinductor_<user> when torchvision is imported, in
# any program: not the harness's write (and the folder holds nothing)
TORCH_OWN = "tmp/torchinductor_"


def _tree(root) -> dict:
    tree = {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0,
                                       p.stat().st_mtime_ns) for p in root.rglob("*")}
    torch_own = [k for k in tree if k.startswith(TORCH_OWN)]
    assert len(torch_own) <= 1 and all(tree[k][0] for k in torch_own), torch_own
    for k in torch_own:
        del tree[k]
    tree["tmp"] = (True, 0, 0)  # TMPDIR's own mtime moves with that folder
    return tree


def test_point8_dry_run_writes_nothing_anywhere(tmp_path):
    home, cwd, tmp, data = (tmp_path / d for d in ("home", "cwd", "tmp", "data"))
    for d in (home, cwd, tmp, data):
        d.mkdir()
    train = _csv_dataset(data)
    env = {k: v for k, v in os.environ.items()
           if k not in ("BENCH_CACHE_DIR", "XDG_CACHE_HOME", "TORCH_HOME", "MPLCONFIGDIR",
                        "HF_HOME", "BENCH_DATA_ROOT")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    argv = ["run", "--dataset", "csv", "--data-opt", f"train={train}", "--method", "sl1h,ls",
            "--seeds", "2", "--results", str(tmp_path / "results"), "--set", "image_size=16",
            "--no-progress"]
    before = _tree(tmp_path)
    for extra in ([], ["--json"]):
        done = subprocess.run(bench_cmd(*argv, "--dry-run", *extra), cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("csv") >= 4  # a row per run: 2 methods x 2 seeds
        assert _tree(tmp_path) == before, sorted(set(_tree(tmp_path)) - set(before))
