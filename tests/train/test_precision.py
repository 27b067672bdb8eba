"""The precision switch (TrainConfig.precision, docs/speed.md "Precision"):
hashed only away from its default, bf16 implying bf16 autocast +
channels_last, a conflict refused, and the matmul setting applied for the
run's steps and restored afterwards."""
import dataclasses

import numpy as np
import pytest
import torch

from bench.core import store
from bench.core.config import PROFILES, TrainConfig, apply_overrides, config_hash, result_fields
from bench.core.errors import BenchError
from bench.methods import create_method
from bench.train.experiment import make_experiment, run_seed

pytestmark = pytest.mark.usefixtures("one_thread")


def test_default_precision_stays_out_of_the_hash_and_the_others_enter_it():
    paper = PROFILES["paper"]
    assert "precision" not in result_fields(paper)
    assert config_hash(result_fields(paper)) == "c92b5b1a8bb9"  # tests/core/test_hash_pins.py
    tf32 = apply_overrides(paper, {"precision": "tf32"})
    assert result_fields(tf32)["precision"] == "tf32"
    assert config_hash(result_fields(tf32)) != "c92b5b1a8bb9"


def test_bf16_precision_implies_autocast_and_channels_last_and_tf32_refuses_bf16():
    cfg = apply_overrides(TrainConfig(), {"precision": "bf16"})
    assert cfg.bf16 and cfg.channels_last
    with pytest.raises(BenchError, match="precision=tf32 with bf16=true"):
        apply_overrides(TrainConfig(), {"precision": "tf32", "bf16": "true"})
    with pytest.raises(BenchError, match="precision"):
        apply_overrides(TrainConfig(), {"precision": "fp8"})


def test_an_explicit_value_against_precision_bf16_is_refused_a_matching_one_kept():
    for key in ("bf16", "channels_last"):
        with pytest.raises(BenchError, match=rf"^--set precision=bf16 with {key}=false: "):
            apply_overrides(TrainConfig(), {"precision": "bf16", key: "false"})
        bf16 = apply_overrides(TrainConfig(), {"precision": "bf16"})
        with pytest.raises(BenchError, match=rf"precision=bf16 with {key}=false"):
            apply_overrides(bf16, {key: "false"})  # the precision set before, the key now
        same = apply_overrides(TrainConfig(), {"precision": "bf16", key: "true"})
        # the hash precision=bf16 configs had before the check (computed on 11dbb2a)
        assert same == bf16 and config_hash(result_fields(same)) == "7a07004d23ab"
    # without precision=bf16 either key is free as before
    assert not apply_overrides(TrainConfig(), {"bf16": "false", "channels_last": "false"}).bf16


def _run(tiny, tmp_path, precision):
    cfg = dataclasses.replace(PROFILES["quick"], cycles=1, epochs_per_cycle=1,
                              precision=precision)
    seen = []
    exp = make_experiment(tiny, "smallcnn", create_method("sl1h"), cfg)
    _, path = run_seed(exp, tiny, create_method("sl1h"), 0, tmp_path / precision,
                       progress=False,
                       on_step=lambda *_: seen.append(torch.get_float32_matmul_precision()))
    return path, set(seen)


def test_the_setting_reaches_the_step_is_restored_and_does_nothing_on_a_cpu(tiny, tmp_path):
    before = torch.get_float32_matmul_precision()
    released, seen_r = _run(tiny, tmp_path, "released")
    tf32, seen_t = _run(tiny, tmp_path, "tf32")
    assert seen_r == {before} and seen_t == {"high"}
    assert torch.get_float32_matmul_precision() == before  # nothing leaks to the next run
    assert store.read_json(tf32 / "config.json")["train"]["precision"] == "tf32"
    # on a CPU TF32 does nothing: the same numbers, bit for bit
    a, b = (store.load_predictions(p)["test_logits"] for p in (released, tf32))
    assert np.array_equal(a, b)
