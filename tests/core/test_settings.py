"""The declaration mechanism (bench.core.settings) on small dataclasses written
here, with the expected messages typed by hand; and that every path that
accepts a config (--set, profiles, bench.api, the training loop) runs the one
`validate`."""
import dataclasses
from dataclasses import dataclass

import pytest

from bench.core.errors import BenchError
from bench.core.settings import Range, Spec, ge, hashed, setting, specs, validate


@dataclass(frozen=True)
class Declared:
    rate: float = setting(0.5, "a rate", range=Range(0, 1, high_open=True), also=(-1.0,))
    mode: str = setting("a", "a mode", choices=("a", "b"))
    lazy: str = setting("x", "choices from a function", choices=lambda: ["x", "y"],
                        choices_text="x or y")
    speed: int = setting(4, "speed only", range=ge(1), in_hash=False)
    flag: bool = setting(True, "a switch")
    plain: int = 3  # declared nowhere: no check, in the hash


@dataclass(frozen=True)
class Plugin:
    """A plugin's Params, declared as the bundled example's are."""

    beta: float = setting(0.1, "weight of the penalty", range=ge(0))


def test_specs_read_field_metadata():
    got = specs(Declared)
    assert list(got) == ["rate", "mode", "lazy", "speed", "flag", "plain"]
    assert got["rate"] == Spec(help="a rate", range=Range(0, 1, high_open=True), also=(-1.0,))
    assert got["plain"] == Spec()
    assert specs(Declared()) == got  # an instance or its class
    assert specs(Plugin()) == {"beta": Spec(help="weight of the penalty", range=Range(low=0))}


def test_text_is_what_the_listing_shows():
    got = specs(Declared)
    assert [got[k].text(kind) for k, kind in
            [("rate", "float"), ("mode", "str"), ("lazy", "str"), ("speed", "int"),
             ("flag", "bool"), ("plain", "int")]] == \
        ["-1 or >= 0 and < 1", "a | b", "x or y", ">= 1", "true | false", "-"]


@pytest.mark.parametrize("change, message", [
    ({"rate": 1.0}, "--set rate=1.0: must be -1 or >= 0 and < 1 (a rate)"),
    ({"rate": -0.5}, "--set rate=-0.5: must be -1 or >= 0 and < 1 (a rate)"),
    ({"mode": "c"}, "unknown mode 'c'; choose from: a, b"),
    ({"lazy": "z"}, "unknown lazy 'z'; choose from: x, y"),
    ({"speed": 0}, "--set speed=0: must be >= 1 (speed only)"),
])
def test_validate_one_line_per_bad_value(change, message):
    validate(Declared())
    for good in ({"rate": -1.0}, {"rate": 0.0}, {"mode": "b"}, {"lazy": "y"}, {"plain": -9}):
        validate(dataclasses.replace(Declared(), **good))
    with pytest.raises(BenchError) as err:
        validate(dataclasses.replace(Declared(), **change))
    assert str(err.value) == message


def test_validate_names_the_owner_of_a_choice_and_reads_a_plugins_range():
    with pytest.raises(BenchError, match=r"^unknown 3hml mode 'c'; choose from: a, b$"):
        validate(dataclasses.replace(Declared(), mode="c"), owner="3hml")
    with pytest.raises(BenchError, match=r"^--set beta=-1: must be >= 0 \(weight of the "):
        validate(Plugin(beta=-1))


def test_hashed_leaves_out_exactly_the_fields_declared_so():
    assert hashed(Declared()) == {"rate": 0.5, "mode": "a", "lazy": "x", "flag": True,
                                  "plain": 3}
    assert hashed(Plugin()) == {"beta": 0.1}


# ------------------------------------------------ every path runs validate --
BAD = {"drop_path": "-0.5"}
MESSAGE = "--set drop_path=-0.5: must be -1 or >= 0 and < 1"


def test_bench_api_refuses_a_bad_value_before_writing(tmp_path):
    from bench import api

    with pytest.raises(BenchError, match=f"^{MESSAGE}"):
        api.run(profile="quick", overrides=BAD, results=str(tmp_path / "r"), dry_run=True)
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*"))


def test_a_profile_is_validated_when_it_is_chosen(monkeypatch):
    from bench.core import config

    broken = dataclasses.replace(config.TrainConfig(), batch_size=1)
    monkeypatch.setitem(config.PROFILES, "broken", broken)
    with pytest.raises(BenchError, match=r"^--set batch_size=1: must be >= 2"):
        config.get_profile("broken")
