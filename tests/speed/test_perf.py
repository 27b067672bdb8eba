"""bench.speed.perf smoke run (no timing assertions) and the trainer's speed switches."""
import dataclasses
import re

import numpy as np
import pytest
import torch

from bench.speed import perf
from bench.train.backbones import build_model
from bench.core.config import PROFILES, TrainConfig, config_hash, result_fields, validate
from bench.core.errors import BenchError
from bench.methods import create_method
from bench.train.loop import train

TINY = ["--backbone", "smallcnn", "--size", "12", "--steps", "2", "--repeats", "1",
        "--eval-images", "16", "--threads", "1"]


pytestmark = pytest.mark.usefixtures("one_thread")


def test_benchmark_prints_settings_table_and_ratios(capsys):
    assert perf.main(TINY + ["--fused-seeds", "2", "--set", "channels_last=true"]) == 0
    out = capsys.readouterr().out
    assert "device cpu" in out and "smallcnn, 4 heads, 12 px, batch 8" in out
    assert "harness --set channels_last=true" in out
    for row in ("harness", "reference", "bare", "harness fused x2"):
        assert re.search(rf"^{row}\s+\d+ \(\d+-\d+\)", out, re.M), row
    for key in ("train harness/reference", "train harness/bare", "eval harness/reference",
                "eval harness/bare", "train harness fused x2/reference"):
        assert re.search(rf"^ratio {key}: \d+\.\d\dx$", out, re.M), key


def test_ratios_are_ratios_of_medians():
    res = {"harness": {"train": [30.0, 10.0, 20.0], "eval": [400.0]},
           "reference": {"train": [5.0, 5.0, 50.0], "eval": [20.0]},
           "bare": {"train": [25.0], "eval": [100.0]}}
    r = perf.ratios(res)
    assert r["train harness/reference"] == pytest.approx(4.0)
    assert r["train harness/bare"] == pytest.approx(0.8)
    assert r["eval harness/reference"] == pytest.approx(20.0)
    assert r["eval harness/bare"] == pytest.approx(4.0)


@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "unknown device 'tpu'; choose from: cpu, cuda"),
    (["--backbone", "vgg"], "unknown backbone 'vgg'"),
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--steps", "1"], "--steps must be >= 2, got 1"),
    (["--eval-images", "8"], "--eval-images must be more than the batch (8), got 8"),
    (["--set", "bf16=maybe"], "--set bf16=maybe: expected bool"),
    (["--set", "warp=9"], "unknown --set key 'warp'"),
    (["--set", "augment_mode=foo"], "unknown augment_mode 'foo'; choose from: batched"),
])
def test_bad_settings_are_one_line_errors(capsys, args, message):
    assert perf.main(TINY + args) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and message in out[1]  # the settings line, then the error


def test_the_multi_head_loss_is_the_mean_head_cross_entropy():
    logits, y = torch.randn(5, 3, 4), torch.randint(0, 4, (5,))
    expected = sum(torch.nn.functional.cross_entropy(logits[:, m], y) for m in range(3)) / 3
    torch.testing.assert_close(perf.MultiHeadCE(3).loss(logits, y), expected)


# ------------------------------------------------------ speed switches ----
def test_only_result_changing_switches_enter_the_run_hash():
    base = config_hash(result_fields(TrainConfig()))
    for field, value in (("channels_last", True), ("compile", True), ("eval_batch_size", 7),
                         ("compile_mode", "reduce-overhead"), ("cudnn_benchmark", False)):
        assert config_hash(result_fields(dataclasses.replace(TrainConfig(), **{field: value}))) \
            == base, field
    for field, value in (("bf16", True), ("augment_mode", "per_image")):
        assert config_hash(result_fields(dataclasses.replace(TrainConfig(), **{field: value}))) \
            != base, field


def _run(bundle, **kw):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=2, **kw)
    torch.manual_seed(0)
    model = build_model("smallcnn", bundle.image_size, 1, bundle.num_classes)[0]
    return train(model, create_method("sl1h"), cfg, bundle, 0, progress=False)


def test_channels_last_is_speed_only_and_bf16_changes_numbers_a_little(tiny):
    plain = _run(tiny)
    nhwc = _run(tiny, channels_last=True, eval_batch_size=7)
    np.testing.assert_allclose(nhwc.test_logits, plain.test_logits, rtol=1e-3, atol=1e-4)
    bf16 = _run(tiny, bf16=True)
    assert np.isfinite(bf16.test_logits).all()
    rel = np.abs(bf16.test_logits - plain.test_logits).max() / np.abs(plain.test_logits).max()
    # bf16 keeps 8 significant bits (unit roundoff u = 2^-9 = 2e-3): autocast must move
    # the logits by at least ~u, and a few layers and 10 steps stay far below 50 u
    # (measured: 0.023). A float32 run (bf16 ignored) or a broken cast fails this.
    assert 2 ** -9 < rel < 0.1


def test_unknown_augment_mode_is_a_one_line_error(tiny):
    # The plan's check (validate) names the setting; a config built by hand that
    # skips it still stops in one line where the augmentation is looked up.
    bad = dataclasses.replace(TrainConfig(), augment_mode="gpu")
    with pytest.raises(BenchError, match="unknown augment_mode 'gpu'; choose from: batched"):
        validate(bad)
    with pytest.raises(BenchError, match="unknown augmentation mode 'gpu'; choose from: batched"):
        _run(tiny, augment_mode="gpu")


def test_compile_uses_the_configured_mode_and_rejects_unknown_ones(monkeypatch):
    """compile=true hands compile_mode to torch.compile (reduce-overhead = CUDA
    graphs on a GPU); a mode torch does not know is a one-line error."""
    from bench.train.loop import prepare_model

    seen = []
    monkeypatch.setattr(torch, "compile", lambda m, mode: seen.append(mode) or ("compiled", m))
    model = torch.nn.Linear(2, 2)
    cfg = dataclasses.replace(TrainConfig(), compile=True, compile_mode="reduce-overhead")
    assert prepare_model(model, cfg, torch.device("cpu"))[1] == ("compiled", model)
    assert seen == ["reduce-overhead"]
    plain = prepare_model(model, TrainConfig(), torch.device("cpu"))
    assert plain[1] is model and seen == ["reduce-overhead"]  # off: not compiled
    with pytest.raises(BenchError, match=r"compile_mode.*'fastest'.*reduce-overhead"):
        validate(dataclasses.replace(cfg, compile_mode="fastest"))  # before the loop is reached
