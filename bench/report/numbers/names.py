"""Display names of a report: `--label KEY=TEXT` and recorded dataset names.

A method's name comes from its registration (Method.display: its declared
display name, else the paper's), a dataset's from `--data-opt name=...`
recorded in config.json (`dataset_name`), a backbone's from its
registration's display name recorded there (`backbone_name`), else the
paper's names (bench.core.paper); `--label` overrides any of them. The result is one dict, key -> text, that the tables,
figures and footnotes read.
"""
from __future__ import annotations

from bench.core.errors import BenchError
from bench.core.paper import DENS


def parse_labels(items, known) -> dict[str, str]:
    """['dca=DCA (ours)', ...] -> {'dca': 'DCA (ours)'}; a key that names no
    method, dataset or backbone of the report (or an empty text) is an error."""
    out: dict[str, str] = {}
    allowed = sorted(set(known) | {DENS})
    for item in items or []:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key or not text:
            raise BenchError(f"--label '{item}': expected KEY=TEXT, e.g. --label "
                             "confpen='CE+CP (ours)'")
        if key not in allowed:
            raise BenchError(f"--label {key}: no method, dataset or backbone of these records "
                             f"is called '{key}'; choose from: {', '.join(allowed)}")
        out[key] = text
    return out


def recorded_names(runs) -> tuple[dict[str, str], list[str]]:
    """dataset or backbone -> the display name its records carry (a dataset's
    `--data-opt name=`, a backbone's registered display name), and a note
    per key whose records carry several (the first is used)."""
    found: dict[str, set] = {}
    for r in runs:
        for field, key in (("dataset_name", r.dataset), ("backbone_name", r.backbone)):
            name = r.record.config.get(field)
            if name:
                found.setdefault(key, set()).add(name)
    names, notes = {}, []
    for key, texts in sorted(found.items()):
        names[key] = sorted(texts)[0]
        if len(texts) > 1:
            notes.append(f"{key}: records carry several display names "
                         f"({', '.join(sorted(texts))}); using '{names[key]}' (set one with "
                         f"--label {key}=TEXT)")
    return names, notes


def report_names(runs, label_items, ablation=None) -> tuple[dict[str, str], list[str]]:
    """The display names of a report (recorded, the ablation's labels
    {METHOD@PREFIX: LABEL}, then --label) and notes."""
    keys = {k for r in runs for k in (r.dataset, r.backbone, r.method)}
    recorded, notes = recorded_names(runs)
    return {**recorded, **(ablation or {}), **parse_labels(label_items, keys)}, notes
