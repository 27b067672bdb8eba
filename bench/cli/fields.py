"""An options dataclass's fields as flags: the one place `bench run`,
`bench report` and `bench data check` get their flags from (each field's
declaration: bench.core.flags). A field is `--field-name` unless it declares
another spelling.
"""
from __future__ import annotations

import argparse

from bench.core.flags import EITHER, ITEMS, PAIRS, REPEAT, SWITCH, declared


def add_fields(parser, cls, only=None, given_only: bool = False) -> None:
    """Add a flag for each field of `cls` (`only`: those named, in `cls`'s
    order). Fields every command shares (--plugin, bench.cli.main) are left
    out unless named. `given_only`: a flag not given leaves no attribute (the
    options dataclass's default applies), so a grid file's value can fill it
    (bench run --grid: bench.cli.commands.run_options)."""
    groups: dict = {}
    for d in declared(cls):
        if (d.name not in only) if only is not None else d.flag.common:
            continue
        f = d.flag
        if f.group and f.group not in groups:
            groups[f.group] = parser.add_argument_group(f.group)
        target = groups.get(f.group, parser)
        text = f.help() if callable(f.help) else f.help  # a help that reads a registry
        unset = {"default": argparse.SUPPRESS} if given_only else {}
        target.add_argument(d.spelling, dest=d.name, help=text, **{**_how(d), **unset})
        for spelling, value, text in f.consts:
            target.add_argument(spelling, dest=d.name, action="store_const", const=value,
                                help=text, **unset)


def _how(d) -> dict:
    """argparse's action, default, type, choices and metavar for a field.
    Repeatable flags collect texts (or what the field's `parse` makes of
    each: --set's typed pairs); the options dataclass turns them into its one
    form (KEY=VALUE -> pairs) when it is built (bench.cli.typed)."""
    f = d.flag
    if d.kind == SWITCH:
        return {"action": "store_true"}
    if d.kind == EITHER:
        return {"action": argparse.BooleanOptionalAction, "default": d.default}
    shown = {k: v for k, v in (("choices", f.choices), ("metavar", f.metavar)) if v is not None}
    if d.kind in (REPEAT, PAIRS, ITEMS):
        action = "extend" if f.nargs else "append"
        empty = [] if d.default == () and d.kind != ITEMS else None
        return {"action": action, "default": empty, **({"nargs": f.nargs} if f.nargs else {}),
                **({"type": f.parse} if f.parse else {}), **shown}
    return {"default": d.default, **({"type": d.type} if d.type else {}), **shown}
