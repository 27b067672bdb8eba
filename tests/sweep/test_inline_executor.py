"""`--executor inline` (or `--jobs 0`): every run in the calling process, one
after another, so `breakpoint()` in a plugin reaches this process (and its
terminal); the same records and hashes as the pool's, bit for bit."""
import json
import os

import numpy as np
import pytest

from bench.cli.main import main
from pluginutil import clean_plugins  # noqa: F401  (fixture)
from sweeputil import TINY

TIMING = {"train_seconds", "train_images_per_s", "infer_ms_per_image", "files", "digest"}
ARGV = ["run", "--dataset", "digits", "--backbone", "smallcnn", "--seeds", "1",
        "--no-progress", *TINY]

# A plugin whose loss calls breakpoint(): the hook below (PYTHONBREAKPOINT)
# records the process it was called in.
STOPPER = '''
import os

from bench.plugins import register_method
from bench.methods.sl1h import CrossEntropy

CALLS = []


def hook(*args, **kwargs):
    CALLS.append(os.getpid())


class Stops(CrossEntropy):
    def loss(self, logits, target):
        breakpoint()
        return super().loss(logits, target)


@register_method("stopper", "CE that stops in the debugger")
def stopper():
    return Stops("stopper")
'''


def records(results) -> dict:
    """label -> (predictions, metrics without timings, config without provenance)."""
    out = {}
    for path in sorted(results.glob("*/*/*/*/seed*")):
        with np.load(path / "predictions.npz") as z:
            arrays = {k: z[k] for k in z.files}
        metrics = json.loads((path / "metrics.json").read_text())
        config = json.loads((path / "config.json").read_text())
        threads = config.pop("provenance")["device"]["threads"]
        out[path.relative_to(results).as_posix()] = (
            arrays, {k: v for k, v in metrics.items() if k not in TIMING}, config, threads)
    return out


def test_inline_records_equal_the_pools_bit_for_bit(tmp_path, capsys):
    pool, inline = tmp_path / "pool", tmp_path / "inline"
    argv = [*ARGV, "--method", "sl1h,mixup"]
    assert main([*argv, "--results", str(pool)]) == 0
    assert main([*argv, "--results", str(inline), "--executor", "inline"]) == 0
    assert "2 trained, 0 already done, 0 failed" in capsys.readouterr().out
    want, got = records(pool), records(inline)
    assert sorted(got) == sorted(want) and len(got) == 2  # the same config hashes
    for label, (arrays, metrics, config, threads) in want.items():
        g_arrays, g_metrics, g_config, g_threads = got[label]
        assert sorted(g_arrays) == sorted(arrays)
        for key in arrays:
            assert g_arrays[key].dtype == arrays[key].dtype
            assert g_arrays[key].tobytes() == arrays[key].tobytes(), (label, key)
        assert g_metrics == metrics and g_config == config and g_threads == threads


@pytest.mark.parametrize("flags", [["--executor", "inline"], ["--jobs", "0"]])
def test_breakpoint_in_a_plugin_reaches_the_calling_process(tmp_path, monkeypatch, capsys,
                                                            flags, clean_plugins):
    (tmp_path / "stopper.py").write_text(STOPPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONBREAKPOINT", "stopper.hook")
    import stopper

    argv = [*ARGV, "--method", "stopper", "--plugin", "stopper",
            "--results", str(tmp_path / "r"), *flags]
    assert main(argv) == 0
    assert "1 trained, 0 already done, 0 failed" in capsys.readouterr().out
    # every step stopped here (a pool's run stops in its own process, whose
    # stdin is /dev/null: pdb would read EOF and quit the run)
    assert len(stopper.CALLS) == 16 and set(stopper.CALLS) == {os.getpid()}


@pytest.mark.parametrize("flags, error", [
    (["--jobs", "-1"], "--jobs -1: must be at least 1, or 0 (one run after another in this "
                       "process, as --executor inline)"),
    (["--jobs", "0", "--executor", "slurm"], "--jobs 0 runs in this process; it does not "
                                             "combine with --executor slurm (drop one of them)"),
    (["--executor", "inlined"], "unknown executor 'inlined'; choose from: inline, local, slurm"),
])
def test_bad_inline_options_are_one_line_exit_2(tmp_path, capsys, flags, error):
    assert main([*ARGV, "--results", str(tmp_path / "r"), *flags]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"bench: error: {error}"
    assert not (tmp_path / "r").exists()
