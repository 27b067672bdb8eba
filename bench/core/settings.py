"""How a hyper-parameter is declared: once, beside its dataclass field.

    lr: float = setting(1e-2, "SGD learning rate", range=gt(0))

`setting` is `dataclasses.field` with a `Spec` in its metadata: the allowed
range or choices, the one-line meaning (`bench list --keys`,
docs/reference.md) and whether the field enters the config hash. `specs(obj)`
reads them back for any hyper-parameter dataclass (the training config, a
method's parameters, a plugin's), `validate(obj)` checks every field against
them in one line per error, and `hashed(obj)` is what the config hash sees.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from bench.core.errors import BenchError, choices_error


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric field: low/high bounds, each open or closed."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def ok(self, value) -> bool:
        lo, hi = self.low, self.high
        return ((lo is None or value > lo or (value == lo and not self.low_open))
                and (hi is None or value < hi or (value == hi and not self.high_open)))

    def text(self) -> str:
        parts = [f"{'>' if self.low_open else '>='} {self.low:g}"] if self.low is not None else []
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return " and ".join(parts) or "any"


def gt(x: float) -> Range:
    return Range(low=x, low_open=True)


def ge(x: float) -> Range:
    return Range(low=x)


NONE = object()  # Spec.legacy of a key without a legacy value


@dataclass(frozen=True)
class Spec:
    """One key's declaration. `choices` is a tuple, or a function returning
    them where they come from a library (its `choices_text` then says what
    the listing shows); `also` are values accepted outside `range` (drop_path's
    -1, 'the implementation's default')."""

    help: str = ""
    range: Range | None = None
    choices: tuple | Callable[[], list] | None = None
    choices_text: str = ""
    also: tuple = ()
    in_hash: bool = True
    # A key added after records existed, whose new default changes the
    # numbers: at `legacy` (the value those records were trained at) it stays
    # out of the hash, so they keep theirs and are that value's records; a
    # record without the key reads as it (recorded()). NONE: no such value.
    legacy: object = NONE

    @property
    def has_legacy(self) -> bool:
        return self.legacy is not NONE

    def allowed(self) -> tuple | None:
        """The choices, or None for a key that has none."""
        if self.choices is None:
            return None
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def ok(self, value) -> bool:
        if value in self.also:
            return True
        if self.range is not None:
            return self.range.ok(value)
        allowed = self.allowed()
        return allowed is None or value in allowed

    def text(self, kind: str = "") -> str:
        """What the key accepts, as `bench list --keys` shows it."""
        if self.range is not None:
            return " or ".join([*(f"{v:g}" for v in self.also), self.range.text()])
        if self.choices is not None:
            return self.choices_text or " | ".join(self.allowed())
        return "true | false" if kind == "bool" else "-"


def setting(default, help: str, *, range: Range | None = None, choices=None,
            choices_text: str = "", also: tuple = (), in_hash: bool = True,
            legacy=NONE):
    """A dataclass field with its Spec: the one place a key is declared.
    `legacy`: the value records made before the key existed were trained at
    (Spec.legacy)."""
    spec = Spec(help=help, range=range, choices=choices, choices_text=choices_text,
                also=tuple(also), in_hash=in_hash, legacy=legacy)
    return dataclasses.field(default=default, metadata={"spec": spec})


def specs(obj) -> dict[str, Spec]:
    """{field: Spec} of a hyper-parameter dataclass (or its class), from the
    fields' metadata; a field declared without `setting` gets an empty Spec
    (no range, no choices, in the hash)."""
    return {f.name: f.metadata.get("spec") or Spec() for f in dataclasses.fields(obj)}


def validate(obj, owner: str = "") -> None:
    """One-line BenchError for the first field outside its declared range or
    choices, in field order. `owner` (a method's name) prefixes choice errors."""
    for name, spec in specs(obj).items():
        value = getattr(obj, name)
        if spec.ok(value):
            continue
        if spec.range is None and spec.choices is not None:
            raise choices_error(f"{owner} {name}".strip(), value, spec.allowed())
        meaning = f" ({spec.help})" if spec.help else ""
        raise BenchError(f"--set {name}={value}: must be {spec.text()}{meaning}")


def hashed(obj) -> dict:
    """The fields that enter the config hash: every field not declared
    `in_hash=False` (those change speed or memory, never the numbers), less a
    field at its `legacy` value (records made before it existed keep their hash)."""
    keep = {name for name, spec in specs(obj).items() if spec.in_hash}
    legacy = {name: spec.legacy for name, spec in specs(obj).items() if spec.has_legacy}
    return {k: v for k, v in dataclasses.asdict(obj).items()
            if k in keep and not (k in legacy and v == legacy[k])}


def recorded(obj, stored: dict):
    """A copy of the hyper-parameter dataclass `obj` (a default) with a
    record's stored values; a key the record lacks takes its `legacy` value
    where it declares one (the record predates it, or was trained at it),
    else the default. Keys `obj` does not have are ignored."""
    names = {f.name for f in dataclasses.fields(obj)}
    fill = {name: spec.legacy for name, spec in specs(obj).items() if spec.has_legacy}
    return dataclasses.replace(obj, **{**fill, **{k: v for k, v in stored.items() if k in names}})
