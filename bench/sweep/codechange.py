"""Why runs train again, or reuse records made by other code: the code
behind them changed since existing records.

A plugin's code digest and a built-in method's own code (bench.core.codeunits:
its module, the network it builds) are part of the config hash, so edited
code trains a new config beside the old one. Without a word that shows up
only later, as two configs `bench report` cannot choose between; `bench run`
(and its dry run) therefore prints one line per changed experiment:

    mcdropout: method code changed (bench.train.nets:MCDropoutNet) since config 4a138b10bb77 (3 records); training config 1195ab...

The shared training code (the loop, the step, the augmentation) is not in
the hash: an edit there reuses the records and says so in one line, and
`bench report` names the mixed versions. `--accept-code-change` records the
current code as the same version as the existing records' (the edit
changes no number): they are reused and reports stop naming it.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from bench.core import codeunits, store
from bench.core.record import Record

PLUGIN_CODE = "plugin_code"
METHOD_CODE = "method_code"
CODE_KEYS = (PLUGIN_CODE, METHOD_CODE)
OPTIONAL = ("weights", METHOD_CODE)  # payload keys present only when set (bench.train.experiment)


@dataclass(frozen=True)
class Change:
    """Experiment `exp` would train; config `old` has `n` complete records of
    the same payload but for the code of `roles`."""
    exp: object
    old: str
    n: int
    config: dict
    roles: tuple


def code_changes(specs, experiments: dict, results) -> list[str]:
    """One line per experiment with runs left to train whose payload, apart
    from its code (and method keys the older records lack, which came with
    it), equals that of complete records under another hash."""
    return [f"{c.exp.method}: {', '.join(c.roles)} code changed"
            f"{_named(own_changes(c))} since config {c.old} ({c.n} record{'s' * (c.n != 1)}); "
            f"training config {c.exp.chash}" for c in changes(specs, experiments, results)]


def _named(units: dict) -> str:
    return f" ({', '.join(sorted(units))})" if units else ""


def changes(specs, experiments: dict, results) -> list[Change]:
    todo = {s.chash for s in specs if s.force or not store.is_complete(s.record)}
    wanted = [experiments[h] for h in todo
              if experiments[h].plugin_code() or experiments[h].method_code]
    if not wanted:
        return []
    by_place = _records_by_config(results, {(e.dataset, e.backbone, e.method) for e in wanted})
    out = []
    for exp in sorted(wanted, key=lambda e: (e.dataset, e.backbone, e.method, e.chash)):
        for old, (config, n) in sorted(by_place.get((exp.dataset, exp.backbone,
                                                     exp.method), {}).items()):
            roles = changed_roles(exp.payload(), config, moved=own_moved(exp, config))
            if old != exp.chash and roles is not None:
                out.append(Change(exp, old, n, config, tuple(roles)))
    return out


def own_changes(change: Change) -> dict[str, str]:
    """unit -> the old records' version, for each of the method's own units
    whose version differs from theirs (records before code identity: the pins)."""
    pins = codeunits.load_pins()
    own = dict(change.exp.method_code).get("units", ()) or \
        (change.config.get(METHOD_CODE) or {}).get("units", ())
    old = codeunits.versions_of(pins, change.config.get("code_units"), own)
    now = codeunits.versions_of(pins, dict(change.exp.code_units), own)
    moved = {u: v for u, v in old.items() if now.get(u) != v}
    if moved:
        return moved
    # one version by the pins, yet edited: the edit that brought a new key
    raw, today = change.config.get("code_units") or {}, dict(change.exp.code_units)
    return {u: raw[u] for u in own if u in raw and raw[u] != today.get(u)}


def own_moved(exp, config: dict) -> bool:
    """Whether a unit of the method's own code differs, digest for digest,
    from the one the record names, also where the pins count both as one
    version: an edit accepted as equal at the older records' key values
    (theirs keep their hash) that brought a new key, whose new default enters
    the hash (rankmixup's rm_form, adafocal's adafocal_precision)."""
    units = config.get("code_units") or {}
    now = dict(exp.code_units)
    own = dict(exp.method_code).get("units", ()) or \
        (config.get(METHOD_CODE) or {}).get("units", ())
    return any(u in units and units[u] != now.get(u) for u in own)


def _records_by_config(results, places: set) -> dict:
    """(dataset, backbone, method) -> {config hash: (its config.json, complete seeds)}."""
    out: dict = {}
    for key in store.iter_records(results):
        place = (key.dataset, key.backbone, key.method)
        if place not in places:
            continue
        configs = out.setdefault(place, {})
        if key.config_hash in configs:
            config, n = configs[key.config_hash]
            configs[key.config_hash] = (config, n + 1)
            continue
        config = Record(key.path(results), results).config  # {} when unreadable
        if config:
            configs[key.config_hash] = (config, 1)
    return out


def changed_roles(payload: dict, config: dict, moved: bool = False) -> list[str] | None:
    """The roles (method, dataset, backbone) whose code differs when
    everything else the hash sees is equal; None when anything else differs
    (another ablation, not a code change) or nothing does. `moved`: the
    method's own code was edited since the record (own_moved)."""
    plain = json.loads(json.dumps(payload, default=str))  # tuples and labels as the record has them
    new_keys = False
    if moved or plain.get(METHOD_CODE) != config.get(METHOD_CODE):
        # a method key the older record lacks came with the code change (a new
        # default that retrains, rankmixup's rm_form): part of it, not another ablation
        had = config.get("method_params") or {}
        params = plain.get("method_params", {})
        plain["method_params"] = {k: v for k, v in params.items() if k in had}
        new_keys = len(plain["method_params"]) < len(params)
    keys = (set(plain) | set(OPTIONAL)) - set(CODE_KEYS)
    if any(config.get(k) != plain.get(k) for k in keys):
        return None
    new, old = plain.get(PLUGIN_CODE, {}), config.get(PLUGIN_CODE) or {}
    roles = {r for r in set(new) | set(old) if new.get(r) != old.get(r)}
    if plain.get(METHOD_CODE) != config.get(METHOD_CODE) or new_keys:
        roles.add("method")
    return sorted(roles) or None


# ------------------------------------------------------- shared code --
def shared_changes(specs, experiments: dict) -> dict[str, Counter]:
    """unit -> Counter of the versions (other than today's) that the complete
    records this grid reuses were made with, for each shared unit that moved."""
    pins = codeunits.load_pins()
    out: dict[str, Counter] = {}
    for spec in specs:
        if spec.force or not store.is_complete(spec.record):
            continue
        now = codeunits.versions_of(pins, dict(experiments[spec.chash].code_units),
                                    codeunits.SHARED)
        old = codeunits.versions_of(pins, Record(spec.record).config.get("code_units"),
                                    codeunits.SHARED)
        for unit, version in old.items():
            if now.get(unit, version) != version:
                out.setdefault(unit, Counter())[version] += 1
    return out


def shared_line(moved: dict[str, Counter]) -> list[str]:
    if not moved:
        return []
    n = max(sum(c.values()) for c in moved.values())
    return [f"shared training code changed ({', '.join(sorted(moved))}) since {n} of the "
            f"records this run reuses: `bench report` names the mixed versions; "
            "--accept-code-change if the edit changes no number, --force to retrain them"]


def plan_accepting(opts, plan) -> tuple:
    """(the grid `plan(opts)` builds, the lines of accept_changes): under
    --accept-code-change the grid is planned again once the pins moved."""
    grid = plan(opts)
    if not opts.accept_code_change:
        return grid, []
    lines = accept_changes(grid.specs, grid.experiments, opts.results)
    return (plan(opts) if lines else grid), lines


def accept_changes(specs, experiments: dict, results) -> list[str]:
    """Record today's code as the version the existing records were made with
    (bench.core.codeunits.accept); one line per unit accepted."""
    equal: dict[str, str] = {}
    for change in changes(specs, experiments, results):
        equal.update(own_changes(change))
    for unit, versions in shared_changes(specs, experiments).items():
        equal[unit] = versions.most_common(1)[0][0]  # the version most records have
    codeunits.accept(equal)
    return [f"accepted: {unit} as the version of the existing records "
            f"({codeunits.PINS.name})" for unit in sorted(equal)]
