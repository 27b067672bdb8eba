"""Why a plugin's runs train again: its code changed since existing records
of the same parameters.

A plugin's code digest is part of its config hash (bench.core.codeid), so
an edited plugin trains a new config beside the old one. Without a word
that shows up only later, as two configs `bench report` cannot choose
between; `bench run` (and its dry run) therefore prints one line per
changed experiment:

    cpen: method code changed since config f73e0c1d2a4b (3 records); training config 1195ab...
"""
from __future__ import annotations

import json

from bench.core import store
from bench.core.record import Record

PLUGIN_CODE = "plugin_code"
OPTIONAL = ("weights",)  # payload keys present only when set (bench.train.experiment)


def code_changes(specs, experiments: dict, results) -> list[str]:
    """One line per experiment with runs left to train whose payload, apart
    from its plugin code, equals that of complete records under another hash."""
    todo = {s.chash for s in specs if s.force or not store.is_complete(s.record)}
    wanted = [experiments[h] for h in todo if experiments[h].plugin_code()]
    if not wanted:
        return []
    by_place = _records_by_config(results, {(e.dataset, e.backbone, e.method) for e in wanted})
    lines = []
    for exp in sorted(wanted, key=lambda e: (e.dataset, e.backbone, e.method, e.chash)):
        for old, (config, n) in sorted(by_place.get((exp.dataset, exp.backbone,
                                                     exp.method), {}).items()):
            roles = changed_roles(exp.payload(), config)
            if old != exp.chash and roles is not None:
                lines.append(f"{exp.method}: {', '.join(roles)} code changed since config "
                             f"{old} ({n} record{'s' * (n != 1)}); training config "
                             f"{exp.chash}")
    return lines


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


def changed_roles(payload: dict, config: dict) -> list[str] | None:
    """The roles (method, dataset, backbone) whose plugin code differs when
    everything else the hash sees is equal; None when anything else differs
    (another ablation, not a code change) or nothing does."""
    plain = json.loads(json.dumps(payload, default=str))  # tuples and labels as the record has them
    keys = (set(plain) | set(OPTIONAL)) - {PLUGIN_CODE}
    if any(config.get(k) != plain.get(k) for k in keys):
        return None
    new, old = plain.get(PLUGIN_CODE, {}), config.get(PLUGIN_CODE) or {}
    roles = [r for r in sorted(set(new) | set(old)) if new.get(r) != old.get(r)]
    return roles or None
