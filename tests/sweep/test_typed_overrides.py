"""--set values are converted to their field's type once, by the plan: a
RunSpec carries typed values through JSON, the worker hands them to
create_method as they are (no text parsed again), and the config hash is
the one the text gave (records on disk stay done)."""
from __future__ import annotations

import pytest

import bench.methods
from bench.core.flags import from_keywords
from bench.sweep.grid import RunSpec
from bench.sweep.options import RunOptions
from sweeputil import run_args, specs_for

SETS = ["--set", "heads=3", "mh_loss=paper", "class_groups=numpy"]
TYPED = {"heads": 3, "mh_loss": "paper", "class_groups": "numpy"}


def test_a_spec_carries_typed_values_through_json(tmp_path):
    (spec,) = specs_for(run_args(tmp_path, "--method", "mhml", "--seeds", "1", *SETS))
    assert dict(spec.method_overrides) == TYPED
    assert type(dict(spec.method_overrides)["heads"]) is int
    again = RunSpec.from_json(spec.to_json())
    assert again == spec and type(dict(again.method_overrides)["heads"]) is int


def test_float_bool_and_int_survive_the_round_trip(tmp_path):
    (dca,) = specs_for(run_args(tmp_path, "--method", "dca", "--seeds", "1", "--set", "beta=2"))
    (focal,) = specs_for(run_args(tmp_path, "--method", "focal", "--seeds", "1", "--set",
                                  "gamma=2"))
    for spec in (dca, focal):
        value = dict(RunSpec.from_json(spec.to_json()).method_overrides)
        assert all(type(v) is float for v in value.values()), value
    spec = RunSpec("digits", "smallcnn", "x", (("n", 3), ("f", 0.25), ("b", True), ("s", "a")),
                   dca.train, 0, "h", "r")
    back = dict(RunSpec.from_json(spec.to_json()).method_overrides)
    assert [type(back[k]) for k in "nfbs"] == [int, float, bool, str]


def test_text_and_python_values_give_the_same_spec_and_hash(tmp_path):
    text = specs_for(run_args(tmp_path, "--method", "mhml", "--seeds", "1", *SETS,
                              "--set", "lr=0.05", "augment=false"))
    opts = from_keywords(RunOptions, "t", dict(
        method="mhml", seeds=1, dataset="digits", backbone="smallcnn", results=str(tmp_path),
        overrides={"cycles": 1, "epochs_per_cycle": 1, "image_size": 16, "batch_size": 64,
                   **TYPED, "lr": 0.05, "augment": False}))
    assert specs_for(opts) == text


def test_the_worker_hands_create_method_typed_values(tmp_path, monkeypatch):
    """The worker's rebuild of a spec (bench.sweep.worker._prepare): the
    values reach create_method as the spec holds them, never as text."""
    from bench.sweep import worker

    (spec,) = specs_for(run_args(tmp_path, "--method", "mhml", "--seeds", "1", *SETS))
    spec = RunSpec.from_json(spec.to_json())  # as a worker process receives it
    seen = []
    real = bench.methods.create_method

    def spy(name, overrides=None):
        seen.append(dict(overrides or {}))
        return real(name, overrides)

    monkeypatch.setattr(bench.methods, "create_method", spy)
    method, exp, *_ = worker._prepare(spec)
    assert seen == [TYPED] and exp.chash == spec.chash and method.heads == 3


@pytest.mark.parametrize("value, message", [("x", "--set heads=x: expected int"),
                                            (2.5, "--set heads=2.5: expected int"),
                                            (True, "--set heads=True: expected int")])
def test_a_value_of_the_wrong_type_is_refused_by_the_plan(value, message, tmp_path):
    from bench.core.errors import BenchError

    opts = from_keywords(RunOptions, "t", dict(method="mhml", results=str(tmp_path),
                                               overrides={"heads": value}))
    with pytest.raises(BenchError, match=message):
        specs_for(opts)
