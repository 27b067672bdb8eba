"""How a command's option is declared: once, beside its options dataclass field.

    jobs: int | None = option(None, "parallel runs ...")
    overrides: tuple = option((), "override a hyper-parameter ...", flag="--set",
                              kind=PAIRS, nargs="+", metavar="KEY=VALUE")

`option` is `dataclasses.field` with a `Flag` in its metadata: the help text,
the flag's spelling (default `--field-name`), choices, metavar, the help
group and the field's kind. The command line builds its flags from these (bench/cli/fields.py: argparse stays in
bench/cli), as `bench list --keys` reads the `--set` keys from
bench.core.settings; bench.api takes the field names as keywords
(`from_keywords`) and gets its signature from them (`signature`).

A field's kind says what its value is and how a caller may give it:

  kind    the field holds                 command line       from Python
  value   one value (int, float, str)     --x V              V; a list is a comma list
  switch  bool                            --x                True / False
  either  bool, or None (not given)       --x / --no-x       True / False / None
  repeat  a tuple of texts (comma lists)  --x A --x B,C      'A' or ['A', 'B,C']
  pairs   (key, value) pairs              --x K=V ...        {K: V} (values keep their type,
                                                             or as text: text_values)
  items   'KEY=TEXT' texts                --x K=T ...        {K: T} (--label: its reader
                                                             checks keys against the records)
  seeds   N, A-B or a comma list (text)   --x 5              5, [0, 3], [2] (seed 2), '2-4'

Every options dataclass derives from `Options`, whose `__post_init__`
brings each value to that one form when the object is built: the command
line's strings and a notebook's dict, list or int give equal objects, and
nothing downstream parses `KEY=VALUE` text again (but `items`). Without `kind` the
annotation decides: bool is a switch, `bool | None` either, tuple repeat,
anything else a value (int and float flags are converted by the parser).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import os
import types
import typing
from dataclasses import dataclass
from typing import Callable

from bench.core.errors import BenchError

VALUE, SWITCH, EITHER, REPEAT, PAIRS, ITEMS, SEEDS = (
    "value", "switch", "either", "repeat", "pairs", "items", "seeds")
KINDS = (VALUE, SWITCH, EITHER, REPEAT, PAIRS, ITEMS, SEEDS)


@dataclass(frozen=True)
class Flag:
    """One option's declaration (what `option` puts in the field's metadata)."""

    help: str | Callable[[], str] | None = None  # a function: text read when --help is built
    flag: str = ""  # its spelling; "" = --field-name
    kind: str = ""  # one of KINDS; "" = from the annotation
    choices: tuple | None = None
    metavar: str | None = None
    nargs: str | None = None  # "+": several values after one flag (--set a=1 b=2)
    group: str = ""  # the --help section it is listed in
    consts: tuple = ()  # (flag, value, help): flags storing a fixed value (--fuse-seeds)
    api_default: object = None  # bench.api's default where it is not the command's
    api_own: bool = False  # api_default was given (option() sets it)
    text_values: bool = False  # pairs read as text by their consumer (--data-opt)
    # argparse's `type` for each text of a PAIRS flag: the value's form from
    # the moment it is parsed (--set: bench.core.config.set_pair)
    parse: Callable[[str], tuple] | None = None
    common: bool = False  # a flag of every command, added by bench.cli.main (--plugin)
    # a run option each run's worker reads: carried in its RunSpec
    # (bench.sweep.grid.worker_options), read there with spec.option(name)
    worker: bool = False
    # a worker option that changes the numbers: it also enters the run's
    # config hash (so its record folder), the dry run's table and JSON; a
    # speed or output switch stays worker=True alone (implies worker)
    hashed: bool = False
    # a key of a grid file (`bench run --grid`): False for what one command
    # does rather than which runs the grid holds (--dry-run, --force, ...)
    in_grid: bool = True
    # (field, value): the option means something only beside that field at
    # that value (None: given at all, False: not given); refused otherwise
    # (check_needs), as argparse would silently take it
    needs: tuple = ()


def option(default=None, help: str | None = None, **declared):
    """A dataclass field declaring its flag (`declared`: Flag's fields)."""
    declared["api_own"] = "api_default" in declared
    return dataclasses.field(default=default, metadata={"flag": Flag(help, **declared)})


@dataclass(frozen=True)
class Declared:
    """One field as the command line and bench.api see it."""

    name: str
    default: object
    flag: Flag
    kind: str
    type: type | None  # int or float for a value the parser converts, else None
    owner: type  # the class that declares the field

    @property
    def spelling(self) -> str:
        return self.flag.flag or "--" + self.name.replace("_", "-")

    @property
    def spellings(self) -> tuple:
        """Every flag that sets this field."""
        return (self.spelling, *(c[0] for c in self.flag.consts))

    @property
    def api_default(self):
        return self.flag.api_default if self.flag.api_own else self.default


@functools.lru_cache(maxsize=None)
def declared(cls) -> tuple[Declared, ...]:
    """The fields of the options dataclass `cls`, each with its declaration,
    listed as --help shows them: the class's own fields, then its bases'."""
    hints = typing.get_type_hints(cls)
    order = {c: i for i, c in enumerate(cls.__mro__)}
    out = []
    for f in dataclasses.fields(cls):
        flag = f.metadata.get("flag", Flag())
        owner = next(c for c in reversed(cls.__mro__)
                     if f.name in c.__dict__.get("__annotations__", {}))
        kind, kind_type = _kind(hints[f.name])
        kind = flag.kind or kind
        if kind not in KINDS:
            raise ValueError(f"{cls.__name__}.{f.name}: kind {kind!r}; one of {KINDS}")
        out.append(Declared(f.name, f.default, flag, kind, kind_type if kind == VALUE else None,
                            owner))
    return tuple(sorted(out, key=lambda d: order[d.owner]))  # stable within a class


def _kind(hint) -> tuple[str, type | None]:
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    args = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    optional = union and type(None) in typing.get_args(hint)
    base = args[0] if len(args) == 1 else None
    if base is bool:
        return (EITHER if optional else SWITCH), None
    if base is tuple or typing.get_origin(base) is tuple:
        return REPEAT, None
    return VALUE, base if base in (int, float) else None


# ------------------------------------------------- one form for each value --
class Options:
    """Base of an options dataclass: every field value is brought to its
    kind's one form when the object is built (see the module's table)."""

    def __post_init__(self):
        for d in declared(type(self)):
            value = getattr(self, d.name)
            new = normal(d, value)
            if new is not value:
                object.__setattr__(self, d.name, new)


def normal(d: Declared, value):
    """`value` as field `d` holds it: the command line's texts and lists and
    Python's dicts, lists and ints all end here."""
    if value is None:
        return () if d.default == () else None
    if d.kind == VALUE:
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        return _commas(value) if isinstance(value, (list, tuple)) else value
    if d.kind == SEEDS:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            return f"{value[0]}-{value[0]}"  # a bare '2' would mean seeds 0..1
        return _commas(value) if isinstance(value, (list, tuple)) else value
    if d.kind in (REPEAT, ITEMS) and not isinstance(value, (str, list, tuple, dict)):
        raise BenchError(f"{d.spelling} {value!r}: expected a text or a list of them")
    if d.kind == REPEAT:
        return (value,) if isinstance(value, str) else tuple(str(v) for v in value)
    if d.kind == PAIRS:
        out = pairs(value, d.spelling)
        if d.flag.text_values:
            out = tuple((k, _text(v)) for k, v in out)
        return out
    if d.kind == ITEMS:
        if isinstance(value, dict):
            return tuple(f"{k}={v}" for k, v in value.items())
        return (value,) if isinstance(value, str) else tuple(value)
    return value


def pairs(value, flag: str = "--set") -> tuple:
    """{'lr': 0.1}, [('lr', 0.1)] or ['lr=0.1'] (the command line's texts,
    each split once on its first '=') -> (('lr', 0.1),); a later key wins."""
    if isinstance(value, dict):
        return tuple(value.items())
    if not isinstance(value, (str, list, tuple)):
        raise BenchError(f"{flag} {value!r}: expected a dict, KEY=VALUE texts or (key, value) "
                         "pairs")
    out: dict = {}
    for item in [value] if isinstance(value, str) else value:
        if isinstance(item, str):
            key, text = split_pair(item, flag)
            out[key] = text
        elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
            out[item[0]] = item[1]
        else:
            raise BenchError(f"{flag} expects key=value, got {item!r}")
    return tuple(out.items())


def split_pair(item: str, flag: str = "--set") -> tuple[str, str]:
    """'lr=0.1' -> ('lr', '0.1'): the one split of a KEY=VALUE text, on its
    first '='; both sides stripped."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise BenchError(f"{flag} expects key=value, got '{item}'")
    return key.strip(), text.strip()


def _commas(values) -> str:
    return ",".join(str(v) for v in values)


def _text(value) -> str:
    """A value as the command line would have spelled it (True -> 'true')."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_needs(opts) -> None:
    """One BenchError for the first option given (not at its default) whose
    declared `needs` does not hold: `--sets-randomize` without `--sets` would
    otherwise change nothing without a word."""
    fields = {d.name: d for d in declared(type(opts))}
    for d in fields.values():
        if not d.flag.needs or getattr(opts, d.name) == d.default:
            continue
        name, value = d.flag.needs
        other, got = fields[name], getattr(opts, name)
        if value is False:
            if got == other.default:
                continue
            raise BenchError(f"{d.spelling} has no effect with {other.spelling}; drop one of "
                             "them")
        if (got == value) if value is not None else got != other.default:
            continue
        want = other.spelling + ("" if value is None else f" {value}")
        raise BenchError(f"{d.spelling} applies with {want} only; add {want} (or drop "
                         f"{d.spelling})")


# ------------------------------------------------------------- bench.api --
def from_keywords(cls, who: str, values: dict, leading: tuple = (), leading_names: tuple = ()):
    """`cls` from a Python caller's arguments: positional values `leading`,
    named in order by `leading_names`, then keywords named as the fields;
    any other name is one BenchError
    listing the allowed ones. Fields not given take bench.api's defaults."""
    if len(leading) > len(leading_names):
        raise BenchError(f"{who} takes at most {len(leading_names)} positional arguments "
                         f"({', '.join(leading_names)}); give the others by name")
    fields = {d.name: d for d in declared(cls)}
    given: dict = dict(zip(leading_names, leading))
    for name, value in values.items():
        if name not in fields:
            near = difflib.get_close_matches(str(name), list(fields), n=1, cutoff=0.7)
            raise BenchError(f"{who}: unknown option {name}; allowed: {', '.join(sorted(fields))}"
                             + (f"; did you mean {near[0]}?" if near else ""))
        if name in given:
            raise BenchError(f"{who}: {name} given twice (by position too); give it once")
        given[name] = value
    return cls(**{name: given.get(name, d.api_default) for name, d in fields.items()})


def signature(cls, positional: tuple = (), first: tuple = ()) -> inspect.Signature:
    """The signature of a bench.api function taking `cls`'s fields (help(),
    a notebook's completion): `first` parameters, then `positional` fields,
    then every other field by keyword, each with bench.api's default."""
    fields = {d.name: d for d in declared(cls)}
    params = list(first)
    params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=fields[n].api_default) for n in positional]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d.api_default)
               for n, d in sorted(fields.items()) if n not in positional]
    return inspect.Signature(params)
