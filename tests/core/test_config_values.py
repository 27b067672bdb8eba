"""The training config's values, ranges and parsing against expectations
written here: the paper (section 4) and the released code (docs/fidelity.md) for the
defaults, hand truth tables for the ranges, hand strings for the parser."""
import dataclasses

import pytest

from bench.core import config as C
from bench.core.errors import BenchError

# Every field of the paper profile: the paper's recipe (SGD lr 1e-2, no momentum
# or weight decay, batch 8, 10 cosine cycles x 5 epochs to lr 0, TrivialAugmentWide)
# and the released code's protocol (ImageNet weights on every dataset,
# docs/fidelity.md), then the speed-only switches.
PAPER = {
    "lr": 0.01, "momentum": 0.0, "weight_decay": 0.0, "batch_size": 8, "cycles": 10,
    "epochs_per_cycle": 5, "eta_min": 0.0, "augment": True,
    "size_rule": "released", "image_size": 0, "test_size": 0, "augment_size": 0,
    "pretrained": True, "backbone_impl": "torchvision", "imagenet_weights": "released",
    "drop_path": -1.0, "drop_last": True, "checkpoint_score": "released",
    "deterministic": False,
    "eval_batch_size": 256, "augment_mode": "batched", "bf16": False, "channels_last": False,
    "compile": False, "compile_mode": "default", "compile_step": False, "graph": "auto", "fuse_as": "auto",
    "cell_conv": "grouped",
    "stage_ahead": "auto", "cudnn_benchmark": True, "precision": "released",
}


def _diff(cfg) -> dict:
    return {k: getattr(cfg, k) for k in PAPER if getattr(cfg, k) != PAPER[k]}


def test_every_default_is_the_paper_and_released_protocol():
    cfg = C.PROFILES["paper"]
    assert {f.name for f in dataclasses.fields(cfg)} == set(PAPER)  # a new field needs a row
    assert {k: getattr(cfg, k) for k in PAPER} == PAPER
    assert all(type(getattr(cfg, k)) is type(v) for k, v in PAPER.items())
    assert cfg.epochs == 50


def test_other_profiles_differ_from_paper_only_where_they_say():
    assert _diff(C.PROFILES["paper-text"]) == {"size_rule": "uniform", "imagenet_weights": "same"}
    assert C.PROFILE_METHOD_SETS == {"paper-text": {"mh_loss": "paper", "class_groups": "numpy"}}
    assert _diff(C.PROFILES["quick"]) == {"cycles": 3, "epochs_per_cycle": 4, "pretrained": False}
    assert _diff(C.PROFILES["demo"]) == {"cycles": 3, "epochs_per_cycle": 30, "lr": 0.1,
                                         "momentum": 0.9, "augment": False,
                                         "pretrained": False}
    assert C.get_profile("quick") is C.PROFILES["quick"]
    with pytest.raises(BenchError) as err:
        C.get_profile("nope")
    assert str(err.value) == "unknown profile 'nope'; choose from: paper, paper-text, quick, demo"


def test_configs_and_ranges_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        C.PROFILES["paper"].lr = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        C.Range(0, 1).low = 2


VALUES = (-0.5, 0.0, 0.5, 1.0, 1.5)
TRUTH = {  # (low_open, high_open) -> ok for each of VALUES on the interval 0..1
    (False, False): (False, True, True, True, False),
    (True, False): (False, False, True, True, False),
    (False, True): (False, True, True, False, False),
    (True, True): (False, False, True, False, False),
}


@pytest.mark.parametrize("lo_open, hi_open", TRUTH)
def test_range_ok_truth_table(lo_open, hi_open):
    rng = C.Range(0, 1, low_open=lo_open, high_open=hi_open)
    assert tuple(rng.ok(v) for v in VALUES) == TRUTH[lo_open, hi_open]


def test_range_defaults_bounds_and_text():
    assert all(C.Range().ok(v) for v in (-1e9, 0, 1e9)) and C.Range().text() == "any"
    assert C.Range() == C.Range(None, None, False, False)
    assert [C.gt(0).ok(v) for v in (0, 1e-12)] == [False, True] and C.gt(0).text() == "> 0"
    assert [C.ge(2).ok(v) for v in (1, 2)] == [False, True] and C.ge(2).text() == ">= 2"
    assert C.Range(high=3).ok(-1e9) and not C.Range(high=3).ok(3.5)
    assert C.Range(high=3).text() == "<= 3"
    assert C.Range(0, 1, high_open=True).text() == ">= 0 and < 1"
    assert C.Range(0.5, 2, low_open=True).text() == "> 0.5 and <= 2"


# (key, a bad value, the nearest good one): the declared ranges of docs/sweeps.md
BOUNDS = [("lr", 0.0, 1e-9), ("momentum", 1.0, 0.99), ("momentum", -0.1, 0.0),
          ("weight_decay", -1e-9, 0.0), ("batch_size", 1, 2), ("cycles", 0, 1),
          ("epochs_per_cycle", 0, 1), ("eta_min", -1e-9, 0.0), ("image_size", -1, 0),
          ("test_size", -1, 0), ("augment_size", -1, 0), ("eval_batch_size", 0, 1),
          ("drop_path", 1.0, 0.99), ("drop_path", -1.5, -1.0)]


@pytest.mark.parametrize("key, bad, good", BOUNDS)
def test_each_declared_range_rejects_the_bad_side(key, bad, good):
    base = C.PROFILES["paper"]
    C.validate(dataclasses.replace(base, **{key: good}))
    with pytest.raises(BenchError, match=rf"^--set {key}={bad}: must be "):
        C.validate(dataclasses.replace(base, **{key: bad}))


def test_every_field_declares_a_meaning_and_numeric_ones_a_range():
    specs = C.specs(C.TrainConfig)
    assert list(specs) == [f.name for f in dataclasses.fields(C.TrainConfig)]
    types = C.field_types(C.PROFILES["paper"])
    for key, spec in specs.items():
        numeric = types[key] in (int, float)
        assert (spec.range is not None) == numeric, key
        assert (spec.choices is not None) == (types[key] is str), key
        assert len(spec.help) > 10, key
    assert {k for k, s in specs.items() if not s.in_hash} == C.NON_RESULT_FIELDS


def test_choices_are_the_protocols_values():
    static = {k: s.choices for k, s in C.specs(C.TrainConfig).items()
              if isinstance(s.choices, tuple)}
    assert static == {"size_rule": ("released", "uniform"),
                      "backbone_impl": ("torchvision", "timm"),
                      "imagenet_weights": ("released", "same"),
                      "checkpoint_score": ("released", "mean_prob"),
                      "augment_mode": ("batched", "per_image"),
                      "graph": ("auto", "true", "false"),
                      "fuse_as": ("auto", "cells", "vmap", "streams"),
                      "cell_conv": ("grouped", "unfold"),
                      "stage_ahead": ("auto", "true", "false"),
                      "precision": ("released", "tf32", "bf16")}
    base = C.PROFILES["paper"]
    C.validate(base)
    for key, allowed in static.items():
        for value in allowed:
            C.validate(dataclasses.replace(base, **{key: value}))
        with pytest.raises(BenchError) as err:
            C.validate(dataclasses.replace(base, **{key: "other"}))
        assert str(err.value) == f"unknown {key} 'other'; choose from: {', '.join(allowed)}"
    for rate in (-1.0, 0.0, 0.5, 0.99):
        C.validate(dataclasses.replace(base, drop_path=rate))
    for rate in (-1.5, -0.5, 1.0):
        with pytest.raises(BenchError) as err:
            C.validate(dataclasses.replace(base, drop_path=rate))
        assert str(err.value) == (f"--set drop_path={rate}: must be -1 or >= 0 and < 1 "
                                  "(stochastic-depth rate; -1 = the implementation's default, "
                                  "else in [0, 1))")


def test_every_profile_validates():
    for name in C.PROFILES:
        C.validate(C.get_profile(name))


def test_parse_set_splits_on_the_first_equals_and_strips():
    assert C.parse_set([" lr = 0.1 ", "name=a=b", "empty="]) == {
        "lr": "0.1", "name": "a=b", "empty": ""}
    assert C.parse_set(None) == {} and C.parse_set([]) == {}
    for bad in ("lr", "=3", " =3"):
        with pytest.raises(BenchError, match=rf"^--set expects key=value, got '{bad}'$"):
            C.parse_set([bad])
    with pytest.raises(BenchError, match="^--data-opt expects key=value"):
        C.parse_data_opts(["x"])
    assert C.parse_data_opts(["train_per_class=10"]) == {"train_per_class": "10"}


@pytest.mark.parametrize("raw, kind, want", [
    ("true", bool, True), ("Yes", bool, True), (" on ", bool, True), ("1", bool, True),
    ("false", bool, False), ("NO", bool, False), ("off", bool, False), ("0", bool, False),
    ("7", int, 7), (" -3 ", int, -3), ("1e-2", float, 0.01), ("-1e300", float, -1e300),
    ("x y", str, "x y"), (5, int, 5), (0.5, float, 0.5), (True, bool, True)])
def test_convert_accepts(raw, kind, want):
    got = C.convert("k", raw, kind)
    assert got == want and type(got) is kind


@pytest.mark.parametrize("raw, kind", [("maybe", bool, ), ("2", bool), ("3.0", int),
                                       ("x", int), ("nan", float), ("", float), (True, int),
                                       # every float key is finite (1e309 parses as inf)
                                       ("inf", float), ("-inf", float), ("1e309", float)])
def test_convert_rejects_in_one_line(raw, kind):
    with pytest.raises(BenchError, match=rf"^--set k={raw}: expected {kind.__name__}, "):
        C.convert("k", raw, kind)


def test_apply_overrides_types_ranges_and_unknown_keys():
    base = C.PROFILES["paper"]
    new = C.apply_overrides(base, {"lr": "0.5", "augment": "no", "batch_size": "16"})
    assert (new.lr, new.augment, new.batch_size) == (0.5, False, 16)
    assert base.lr == 0.01  # a copy
    with pytest.raises(BenchError, match="--set key.*lrr"):
        C.apply_overrides(base, {"lrr": "1"})
    with pytest.raises(BenchError, match="^--set batch_size=1: must be >= 2"):
        C.apply_overrides(base, {"batch_size": "1"})


def test_result_fields_leave_out_exactly_the_speed_switches():
    got = C.result_fields(C.PROFILES["paper"])
    assert set(PAPER) - set(got) == {"eval_batch_size", "channels_last", "compile",
                                     "compile_mode", "compile_step", "cudnn_benchmark",
                                     "deterministic", "graph", "fuse_as", "cell_conv", "stage_ahead", "precision"}  # precision: at its legacy value
    assert all(got[k] == PAPER[k] for k in got)


def test_load_kwargs_from_plain_values():
    assert C.load_kwargs(True, False, ["a=1", "b=x"]) == {"download": True, "progress": False,
                                                         "a": "1", "b": "x"}
    assert C.load_kwargs(data_opts=("a=2",)) == {"download": False, "progress": True, "a": "2"}
    assert C.load_kwargs() == {"download": False, "progress": True}
