"""The run hash: every result-changing setting changes it, and only the
speed-only switches that the docs list are left out of it."""
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest

from bench.core.config import NON_RESULT_FIELDS, TrainConfig, config_hash, result_fields
from bench.methods import METHODS, create_method
from bench.train.experiment import Experiment

DOCS = Path(__file__).resolve().parents[2] / "docs" / "speed.md"


def changed(value):
    """A different value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return value + "-other"


def experiment(train=TrainConfig(), method="sl1h", params=(), heads=1, **kw):
    base = dict(dataset="digits", backbone="smallcnn", method=method, method_params=params,
                heads=heads, train=train, data_identity=(("source", "sklearn"),))
    return Experiment(**{**base, **kw})


def docs_speed_only_fields() -> set[str]:
    """Fields whose 'in run hash' cell is 'no' in docs/speed.md's switch table."""
    rows = re.findall(r"^\| `(\w+)` \| [^|]* \| (yes|no) \|", DOCS.read_text(), re.M)
    assert rows, "switch table not found in docs/speed.md"
    return {name for name, in_hash in rows if in_hash == "no"}


def test_speed_only_fields_are_exactly_the_documented_ones():
    assert set(NON_RESULT_FIELDS) == docs_speed_only_fields()
    assert set(NON_RESULT_FIELDS) <= {f.name for f in dataclasses.fields(TrainConfig)}


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(TrainConfig)])
def test_each_train_field_changes_the_hash_unless_speed_only(field):
    base = TrainConfig()
    other = dataclasses.replace(base, **{field: changed(getattr(base, field))})
    same = experiment(other).chash == experiment(base).chash
    assert same == (field in NON_RESULT_FIELDS), field
    assert (field in result_fields(other)) == (field not in NON_RESULT_FIELDS)


@pytest.mark.parametrize("name", METHODS.names())
def test_each_method_parameter_changes_the_hash(name):
    params = create_method(name).params
    base = experiment(method=name, params=tuple(sorted(dataclasses.asdict(params).items())))
    for f in dataclasses.fields(params):
        other = dataclasses.replace(params, **{f.name: changed(getattr(params, f.name))})
        exp = dataclasses.replace(base, method_params=tuple(sorted(
            dataclasses.asdict(other).items())))
        assert exp.chash != base.chash, (name, f.name)


def test_identity_fields_change_the_hash():
    base = experiment()
    for key, value in (("dataset", "pathmnist"), ("backbone", "resnet18"), ("method", "ls"),
                       ("heads", 2), ("data_identity", (("source", "other"),))):
        assert dataclasses.replace(base, **{key: value}).chash != base.chash, key


def test_hash_is_the_sha256_of_the_canonical_json():
    payload = {"b": [1, 2.5], "a": {"y": True, "x": None}}
    text = '{"a":{"x":null,"y":true},"b":[1,2.5]}'  # keys sorted, no spaces
    assert config_hash(payload) == hashlib.sha256(text.encode()).hexdigest()[:12]
    assert json.loads(text) == payload
    assert experiment().chash == experiment().chash  # stable across calls
