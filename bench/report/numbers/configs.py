"""Which config of a method is a row: `bench report --config`.

A (dataset, backbone, method) cell with records of several config hashes is
never resolved silently: `--config` gives hash prefixes (for any method, or
METHOD=PREFIX for one), a rule (`latest`, `most-seeds`), or an ablation
(METHOD=PREFIX:LABEL, repeatable for one method: each config a labelled row,
keyed METHOD@PREFIX). docs/reports.md describes each form.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

from bench.core import codeunits
from bench.core.errors import BenchError
from bench.report.numbers import frame


CONFIG_RULES = {
    # rule -> sort key over one config's runs; the largest wins. `latest`:
    # the newest config made by today's method code, then the newest (a
    # method edited and reverted trains a config that today's code no longer
    # makes; the reverted code's older records are today's)
    "latest": lambda runs: (_today(runs) is True, max(_mtime(r) for r in runs)),
    "most-seeds": lambda runs: (len(runs), max(_mtime(r) for r in runs)),
}


def _mtime(run) -> float:
    return run.record.mtime


def _today(runs) -> bool | None:
    """Whether a config's records were made by today's method code (None:
    they cannot say: bench.core.codeunits.made_by_today)."""
    return codeunits.made_by_today(runs[0].record.config)


def _why_latest(best: str, hashes: dict) -> str:
    """What the note adds where today's code, not the date, chose."""
    newer = [h for h in hashes if h != best
             and max(map(_mtime, hashes[h])) > max(map(_mtime, hashes[best]))]
    if not newer or _today(hashes[best]) is not True:
        return ""
    return (f": the newest config made by today's method code; {', '.join(sorted(newer))} "
            "is newer, made by other code")


def parse_ablation(config: str | None) -> dict[str, dict[str, str]]:
    """--config's METHOD=PREFIX:LABEL items -> {method: {prefix: label}}: each
    such config of the method is a row of its own (an ablation), keyed
    METHOD@PREFIX and shown as LABEL."""
    out: dict = {}
    for item in [c.strip() for c in (config or "").split(",") if c.strip()]:
        method, sep, rest = item.partition("=")
        prefix, colon, label = rest.partition(":")
        if sep and colon:
            if not method.strip() or not prefix.strip() or not label.strip():
                raise BenchError(f"--config {item}: expected METHOD=PREFIX:LABEL, e.g. "
                                 "dca=3f2a:'DCA beta 1'")
            out.setdefault(method.strip(), {})[prefix.strip()] = label.strip()
    return out


def ablation_key(method: str, prefix: str) -> str:
    return f"{method}@{prefix}"


def parse_config_choice(config: str | None, known: list[str]):
    """--config items -> (prefixes for any method, {method: prefix}, rule or None).
    Items: PREFIX, METHOD=PREFIX, or a rule (latest, most-seeds); ablation
    items (METHOD=PREFIX:LABEL, parse_ablation) are only checked here."""
    anywhere, per_method, rule = [], {}, None
    for item in [c.strip() for c in (config or "").split(",") if c.strip()]:
        method, sep, prefix = item.rpartition("=")
        if sep and ":" in item.partition("=")[2]:
            method, _, prefix = item.partition("=")
            prefix = prefix.partition(":")[0]
            if not any(h.startswith(prefix) for h in known):
                raise BenchError(f"--config {item}: matches no record; configs present: "
                                 f"{', '.join(known)}")
            continue
        if not sep and item in CONFIG_RULES:
            if rule not in (None, item):  # last-wins would silently drop one
                raise BenchError(f"--config {rule},{item}: two rules contradict each other; "
                                 "give one of them")
            rule = item
            continue
        if not any(h.startswith(prefix) for h in known):
            raise BenchError(f"--config {item}: matches no record; configs present: "
                             f"{', '.join(known)}; or a rule: {', '.join(CONFIG_RULES)}")
        earlier = per_method.get(method, prefix)
        if sep and not (earlier.startswith(prefix) or prefix.startswith(earlier)):
            raise BenchError(f"--config {method}={per_method[method]},{item}: two configs for "
                             f"{method} contradict each other; give one of them")
        if sep:
            per_method[method] = max(earlier, prefix, key=len)
        else:
            anywhere.append(prefix)
    return anywhere, per_method, rule


def select_configs(runs: list, config: str | None = None) -> tuple[list, list[str]]:
    """One config hash per (dataset, backbone, method), never picked silently.

    `config`: comma-separated items, each a hash prefix (for every method it
    matches), METHOD=PREFIX (that method only) or a rule (`latest`: the config
    with the newest record; `most-seeds`: the one with most seeds, then newest),
    applied where prefixes leave more than one. A prefix matching no record is
    an error. A cell still left with several configs stops the report with a
    one-line error listing each candidate, its differing settings and seed
    count (docs/reports.md). Every chosen config is named in a note.
    """
    anywhere, per_method, rule = parse_config_choice(config, sorted({r.chash for r in runs}))
    ablation = parse_ablation(config)
    by_cell: dict = defaultdict(lambda: defaultdict(list))
    for r in runs:
        by_cell[(r.dataset, r.backbone, r.method)][r.chash].append(r)
    keep, notes = [], []
    for cell, hashes in sorted(by_cell.items()):
        if cell[2] in ablation:
            keep += ablation_rows(cell, hashes, ablation[cell[2]])
            continue
        prefixes = [per_method[cell[2]]] if cell[2] in per_method else anywhere
        chosen = [h for h in hashes if any(h.startswith(p) for p in prefixes)] or sorted(hashes)
        if len(chosen) > 1 and rule:
            chosen = [max(chosen, key=lambda h: CONFIG_RULES[rule](hashes[h]))]
        if len(chosen) > 1:
            raise BenchError(_ambiguous(cell, {h: hashes[h] for h in chosen}))
        best = chosen[0]
        keep += sorted(hashes[best], key=lambda r: r.seed)
        others = [f"{h} ({len(v)} seeds)" for h, v in sorted(hashes.items()) if h != best]
        if others:
            how = f"--config {rule}" if rule and not prefixes else "--config"
            if how == "--config latest":
                how += _why_latest(best, hashes)
            notes.append(f"{'/'.join(cell)}: using config {best} ({len(hashes[best])} seeds, "
                         f"chosen by {how}), ignoring {', '.join(others)}")
    return keep, notes


def ablation_rows(cell: tuple, hashes: dict, prefixes: dict) -> list:
    """The runs of each config an ablation names, as rows METHOD@PREFIX (a
    prefix this cell has no record of leaves that row empty here)."""
    out = []
    for prefix in prefixes:
        chosen = [h for h in hashes if h.startswith(prefix)]
        if len(chosen) > 1:
            raise BenchError(_ambiguous(cell, {h: hashes[h] for h in chosen}))
        key = ablation_key(cell[2], prefix)
        out += [dataclasses.replace(r, method=key) for h in chosen
                for r in sorted(hashes[h], key=lambda r: r.seed)]
    return out


def _settings_of(run) -> dict:
    return frame.settings(run.record.config)


def _ambiguous(cell: tuple, hashes: dict) -> str:
    """One line: each candidate config with the settings where they differ."""
    settings = {h: _settings_of(rs[0]) for h, rs in hashes.items()}
    keys = sorted({k for s in settings.values() for k in s})
    differ = [k for k in keys if len({repr(s.get(k)) for s in settings.values()}) > 1]
    parts = []
    for h, rs in sorted(hashes.items()):
        diff = ", ".join(f"{k.removeprefix('train_')}={settings[h].get(k, '?')}" for k in differ)
        parts.append(f"{h} ({len(rs)} seeds{'; ' + diff if diff else ''})")
    return (f"{'/'.join(cell)} has records of {len(hashes)} configs: {'; '.join(parts)}; "
            f"choose with --config METHOD=PREFIX[,...], --config latest|most-seeds, "
            f"METHOD=PREFIX:LABEL (each config its own row), or --method/--backbone")
