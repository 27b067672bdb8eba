"""RunSpec's JSON is generated from its dataclass fields (bench.sweep.specjson):
every field survives the trip to a worker process with its type, and a field
whose type has no codec is refused rather than sent as text."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.core.config import TrainConfig
from bench.sweep import specjson
from bench.sweep.grid import RunSpec

# one value per RunSpec field, none of them the default, each of its type
EVERY_FIELD = dict(
    dataset="digits", backbone="smallcnn", method="mhml",
    method_overrides=(("f", 0.25), ("heads", 3), ("on", True), ("s", "a")),
    train=TrainConfig(lr=0.05, cycles=2, augment=False, size_rule="uniform"),
    seed=4, chash="abc123", results="/r", data_root="/d", device="cpu", force=True,
    load_options=(("download", False), ("progress", True), ("train_per_class", "10")),
    weights="/w.safetensors", sizes=(32, 28, 28), plugins=(("my_plugin", "/p"),),
    keep_weights=True, evals=("shift", "ood:kvasir"), run_options=(("probe", 7), ("tau", 2.0)),
    hashed_options=("tau",))


def test_every_field_round_trips_with_its_type():
    assert set(EVERY_FIELD) == {f.name for f in dataclasses.fields(RunSpec)}, \
        "a RunSpec field was added: give it a value here (its codec is checked below)"
    spec = RunSpec(**EVERY_FIELD)
    for f in dataclasses.fields(RunSpec):
        assert getattr(spec, f.name) != f.default, f.name
    back = RunSpec.from_json(spec.to_json())
    assert back == spec
    for name, value in EVERY_FIELD.items():
        got = getattr(back, name)
        assert type(got) is type(value), name
        if isinstance(value, tuple):
            assert [type(v) for v in got] == [type(v) for v in value], name
    overrides = dict(back.method_overrides)
    assert [type(overrides[k]) for k in ("f", "heads", "on", "s")] == [float, int, bool, str]


def test_every_field_has_a_codec():
    assert set(specjson.codecs(RunSpec)) == {f.name for f in dataclasses.fields(RunSpec)}


def test_the_json_is_plain_and_an_older_spec_takes_defaults():
    spec = RunSpec(**EVERY_FIELD)
    data = json.loads(spec.to_json())
    assert data["train"]["lr"] == 0.05 and data["method_overrides"][1] == ["heads", 3]
    # fields added after the first specs were written
    for newer in ("sizes", "plugins", "keep_weights", "evals", "run_options",
                  "hashed_options"):
        del data[newer]
    old = RunSpec.from_json(json.dumps(data))
    assert old == dataclasses.replace(spec, sizes=(), plugins=(), keep_weights=False, evals=(),
                                      run_options=(), hashed_options=())


def test_a_type_without_a_codec_is_refused():
    @dataclass(frozen=True)
    class Odd:
        name: str
        when: complex = 0j

    with pytest.raises(TypeError, match="no JSON codec"):
        specjson.codecs(Odd)


def test_paths_and_optional_dataclasses_have_codecs():
    @dataclass(frozen=True)
    class Holder:
        where: Path
        cfg: TrainConfig | None = None

    for value in (Holder(Path("/a/b")), Holder(Path("x"), TrainConfig(lr=0.5))):
        assert specjson.loads(Holder, specjson.dumps(value)) == value
