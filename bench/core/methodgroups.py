"""The method groups `--method` takes beside single names, and the one text
that says what each holds (`bench run --help`, docs/reference.md): standard
library only, so building `bench run`'s flags loads no method module
(bench.methods registers the methods and takes its groups from here).
"""
from __future__ import annotations

from bench.core.paper import DENS, ENSEMBLE_OF, EXTRA_BASELINES, PAPER_METHODS

# `--method extra`: the calibration baselines reviewers ask for beside the
# paper's (docs/methods.md). A group of its own, kept out of `--method all`,
# so `all`, `./run_all.sh --quick` and their reports train and print what
# they did before these were added.
EXTRA = ("mdca", "flmdca", "lsmdca", "brier", "mmce", "mcdropout", "batchensemble", "packed")
# `--method recent`: the calibration losses of 2021-2023 (docs/methods.md,
# "Recent calibration losses"), kept out of `all` likewise.
RECENT = ("dualfocal", "acls", "rankmixup", "mimo", "adafocal", "cals")
METHOD_GROUPS = {"extra": EXTRA, "recent": RECENT}

# how --help names the members a reader may not know by their keys
SPELLED = {"batchensemble": "batchensemble (BatchEnsemble)",
           "packed": "packed (Packed-Ensembles)", "mcdropout": "mcdropout (MC-Dropout)"}


def _members(names) -> str:
    return ", ".join(SPELLED.get(n, n) for n in names)


def method_help() -> str:
    """--method's help: every group with what it holds."""
    return ("method name(s), comma separated, or a group: "
            f"paper = the paper's {len(PAPER_METHODS)} trained methods "
            f"({_members(PAPER_METHODS)}); "
            f"all = paper and the released code's {_members(EXTRA_BASELINES)}; "
            f"extra = further calibration baselines ({_members(EXTRA)}); "
            f"recent = recent calibration losses ({_members(RECENT)}); "
            f"{DENS} = the deep ensemble of the {ENSEMBLE_OF} seeds (2 seeds or more); "
            "mhml with --set heads=M; docs/methods.md")
