"""`bench report --compare paper`: our runs against the published numbers, and the paper's claims as tests.

Pure functions. Input: aggregated rows, one per (dataset, backbone, method,
variant, metric) with `mean`, `std` (population, ddof=0, None for a single
model) and `n` seeds, in the paper's units (x100). `variant` is '' (main
table), 'ts-base' (head logits averaged, T = 1) or 'ts' (temperature scaled).
Output: comparison rows, notes naming what is missing, and claim rows.

Within noise: z = (ours - published) / sqrt(s1^2/(n1-1) + s2^2/(n2-1)); both
stds are population stds, so s^2/(n-1) is the sample variance over n, the
squared standard error of the mean. A side without a std (D-Ens, the +TS
tables, PathMNIST's NLL) or with one seed adds no term: the z of the other
side alone is shown and `basis` says so (it overstates |z|: that side's
noise is left out); with no term at all there is no z. |z| > 2 is flagged.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

from bench.core.paper import BACKBONE_ALIASES, DENS, TABLE_METHODS, TS_METHODS
from bench.core.registry import Registry
from bench.calib import variants as V
from bench.report.paper import published as pub
from bench.report.numbers.ranks import mean_ranks, rank_marks
from bench.report.render.tables import method_name

Z_FLAG = 2.0
ACC_TOLERANCE = 1.0  # "comparable ACC": at most this many points (x100) below SL1H
# The rows' `variant` spellings (bench.calib.variants.Variant.column)
MAIN, TS = V.PLAIN.column, V.TS.column
# The rows of the paper's temperature-scaling tables, as (method, variant column).
TS_ROWS = tuple((m, v.column) for m in TS_METHODS for v in V.TS_VARIANTS)


def as_rows(data) -> list[dict]:
    """Rows from a list of dicts or a pandas frame (anything with to_dict)."""
    rows = data.to_dict("records") if hasattr(data, "to_dict") else list(data)
    return [{**r, "backbone": BACKBONE_ALIASES.get(r["backbone"], r["backbone"]),
             "variant": r.get("variant") or MAIN} for r in rows]


def rows_from_groups(groups: dict) -> list[dict]:
    """bench.report.numbers.aggregate groups (fractions) -> input rows (x100)."""
    out = []
    for (ds, bb, _), g in sorted(groups.items()):
        # D-Ens (and every row but the TS table's) is a main-table row
        method, variant = g.row_method, g.variant.column
        for m in pub.METRICS:
            if m in g.values:
                std = g.std(m)
                out.append({"dataset": ds, "backbone": bb, "method": method, "variant": variant,
                            "metric": m, "mean": 100 * g.mean(m),
                            "std": None if std is None else 100 * std,
                            "n": 1 if g.single else g.n})  # D-Ens: one model, as published
    return out


def label(method: str, variant: str) -> str:
    """The row key: '4hml+ts'."""
    return V.of_column(variant).key(method)


def show(method: str, variant: str) -> str:
    """'4HML+TS'; the TS table's un-scaled row (logits averaged, T = 1): '4HML (T=1)'."""
    return method_name(method) + V.of_column(variant).shown


# ---------------------------------------------------------------- z rule


def _term(std, n) -> float | None:
    return std * std / (n - 1) if std is not None and n is not None and n > 1 else None


def z_score(ours_mean, ours_std, ours_n, pub_mean, pub_std, pub_n) -> tuple[float | None, str]:
    """(z, basis): basis 'both', 'ours only', 'published only' or 'no std'."""
    terms = {"ours only": _term(ours_std, ours_n), "published only": _term(pub_std, pub_n)}
    present = [k for k, v in terms.items() if v is not None]
    if not present:
        return None, "no std"
    var = sum(terms[k] for k in present)
    diff = ours_mean - pub_mean
    basis = "both" if len(present) == 2 else present[0]
    if var == 0:
        return (0.0 if diff == 0 else math.copysign(math.inf, diff)), basis
    return diff / math.sqrt(var), basis


def within(z, judge: bool = True) -> str:
    if not judge:
        return "n/a (erratum)"
    if z is None:
        return "n/a"
    return "yes" if abs(z) <= Z_FLAG else "no"


# ---------------------------------------------------------------- comparison


def _key(r: dict) -> tuple:
    return r["dataset"], r["backbone"], r["method"], r["variant"], r["metric"]


def _row_order(r: dict) -> tuple:
    """Dataset, backbone, then the paper's row order, then ACC/ECE/NLL."""
    metric = pub.METRICS.index(r["metric"]) if r["metric"] in pub.METRICS else 9
    return r["dataset"], r["backbone"], _paper_order((r["method"], r["variant"])), metric


def compare(ours, reference: list[dict] | None = None) -> tuple[list[dict], list[str]]:
    """Comparison rows for every value both sides have, and notes naming the
    rest (published without runs, runs not in the paper); never an error."""
    ours = as_rows(ours)
    reference = pub.reference() if reference is None else reference
    published = {_key(r): r for r in reference}
    rows = []
    for o in sorted(ours, key=_row_order):
        p = published.get(_key(o))
        if p is None:
            continue
        z, basis = z_score(o["mean"], o["std"], o["n"], p["mean"], p["std"], p["n"])
        rows.append({"dataset": o["dataset"], "backbone": o["backbone"], "method": o["method"],
                     "variant": o["variant"], "metric": o["metric"], "ours_mean": o["mean"],
                     "ours_std": o["std"], "ours_n": o["n"], "pub_mean": p["mean"],
                     "pub_std": p["std"], "pub_n": p["n"], "diff": o["mean"] - p["mean"],
                     "z": z, "basis": basis, "within": within(z, p["judge"]),
                     "source": p["source"], "std_source": p["std_source"], "caveat": p["caveat"]})
    return rows, missing_notes(ours, reference)


def _paper_order(mv: tuple[str, str]) -> tuple:
    method, variant = mv
    order = TABLE_METHODS.index(method) if method in TABLE_METHODS else 99
    return order, V.TABLE_VARIANTS.index(V.of_column(variant)), method


def missing_notes(ours: list[dict], reference: list[dict]) -> list[str]:
    """What the paper has that the runs lack (by dataset, backbone, row) and
    what the runs have that the paper lacks, each as one line."""
    def cells(rows):
        out: dict = defaultdict(lambda: defaultdict(set))
        for r in rows:
            out[r["dataset"]][r["backbone"]].add((r["method"], r["variant"]))
        return out

    have, paper = cells(ours), cells(reference)
    notes = []
    absent = sorted(set(paper) - set(have))
    if absent:
        notes.append(f"paper datasets without runs: {', '.join(absent)}")
    for ds in sorted(set(paper) & set(have)):
        no_bb = sorted(set(paper[ds]) - set(have[ds]))
        if no_bb:
            notes.append(f"{ds}: paper backbones without runs: {', '.join(no_bb)}")
        for bb in sorted(set(paper[ds]) & set(have[ds])):
            lack = sorted(paper[ds][bb] - have[ds][bb], key=_paper_order)
            if lack:
                notes.append(f"{ds}/{bb}: published rows without runs: "
                             + ", ".join(label(*mv) for mv in lack))
    extra = [f"{ds}/{bb}/{label(*mv)}" for ds in sorted(have) for bb in sorted(have[ds])
             for mv in sorted(have[ds][bb] - paper.get(ds, {}).get(bb, set()), key=_paper_order)]
    if extra:
        notes.append("not in the paper (not compared): " + ", ".join(extra))
    return notes


# ---------------------------------------------------------------- claims

CLAIMS = Registry("claim")  # key -> fn, described by the claim's text


def claim(key: str, text: str):
    """Register a claim: fn(means) -> (held: bool | None, numbers: str), with
    means {(method, variant): {metric: mean}} of one (dataset, backbone)
    block; None = not evaluable here (numbers says why)."""
    return CLAIMS.register(key, text)


def _fmt(means, mv, metrics=pub.METRICS) -> str:
    return f"{show(*mv)} " + "/".join(f"{means[mv][m]:.2f}" for m in metrics)


def _needs(means, *mvs) -> str | None:
    missing = [label(*mv) for mv in mvs if mv not in means]
    return f"needs {', '.join(missing)}" if missing else None


def _top2(means, order, target) -> tuple[bool | None, str]:
    present = [mv for mv in order if mv in means]
    if target not in means or len(present) < 3:
        return None, _needs(means, target) or f"needs >= 3 rows, have {len(present)}"
    ranks = mean_ranks([means[mv] for mv in present])
    marks = dict(zip(present, rank_marks(ranks)))
    text = ", ".join(f"{show(*mv)} {r:.1f}" for mv, r in zip(present, ranks))
    return marks[target] in ("best", "second"), f"Rank over {len(present)} rows: {text}"


@claim("4hml-top2", "4HML has the best or second-best Rank of its block")
def _4hml_top2(means):
    return _top2(means, [(m, MAIN) for m in TABLE_METHODS], ("4hml", MAIN))


@claim("mh-ece-below-sl1h", f"2HML and 4HML: ECE below SL1H at comparable ACC "
                            f"(at most {ACC_TOLERANCE:g} point below)")
def _mh_below_sl1h(means):
    heads = [mv for mv in (("2hml", MAIN), ("4hml", MAIN)) if mv in means]
    if ("sl1h", MAIN) not in means or not heads:
        return None, _needs(means, ("sl1h", MAIN)) or "needs 2hml or 4hml"
    ref = means[("sl1h", MAIN)]
    held = all(means[mv]["ece"] < ref["ece"] and means[mv]["acc"] >= ref["acc"] - ACC_TOLERANCE
               for mv in heads)
    return held, "; ".join(_fmt(means, mv, ("acc", "ece")) for mv in [("sl1h", MAIN)] + heads)


def _lower(means, a, b, metric) -> tuple[bool | None, str]:
    if a not in means or b not in means:
        return None, _needs(means, a, b)
    return means[a][metric] < means[b][metric], f"{metric.upper()} " + " vs ".join(
        f"{show(*mv)} {means[mv][metric]:.2f}" for mv in (a, b))


@claim("4hml-ece-below-dens", "4HML has lower ECE than D-Ens")
def _4hml_below_dens(means):
    return _lower(means, ("4hml", MAIN), (DENS, MAIN), "ece")


@claim("4hml-ece-below-2hml", "more heads, lower ECE: 4HML below 2HML")
def _4hml_below_2hml(means):
    return _lower(means, ("4hml", MAIN), ("2hml", MAIN), "ece")


@claim("dens-best-acc", "D-Ens has the highest ACC of its block")
def _dens_best_acc(means):
    present = [(m, MAIN) for m in TABLE_METHODS if (m, MAIN) in means]
    if (DENS, MAIN) not in means or len(present) < 2:
        return None, _needs(means, (DENS, MAIN)) or "needs another method"
    best = max(present, key=lambda mv: means[mv]["acc"])
    return best == (DENS, MAIN), (f"ACC D-Ens {means[(DENS, MAIN)]['acc']:.2f}, best "
                                  f"{show(*best)} {means[best]['acc']:.2f}")


@claim("4hml+ts-top2", "4HML+TS has the best or second-best Rank of its TS block")
def _4hml_ts_top2(means):
    return _top2(means, TS_ROWS, ("4hml", TS))


@claim("4hml+ts-beats-sl1h+ts", "4HML+TS ranks better than SL1H+TS (TS block)")
def _4hml_ts_vs_sl1h_ts(means):
    present = [mv for mv in TS_ROWS if mv in means]
    if ("4hml", TS) not in means or ("sl1h", TS) not in means:
        return None, _needs(means, ("4hml", TS), ("sl1h", TS))
    ranks = dict(zip(present, mean_ranks([means[mv] for mv in present])))
    return ranks[("4hml", TS)] < ranks[("sl1h", TS)], (
        f"Rank 4HML+TS {ranks[('4hml', TS)]:.1f} vs SL1H+TS {ranks[('sl1h', TS)]:.1f} "
        f"over {len(present)} rows")


def block_means(rows: Iterable[dict]) -> dict:
    """(dataset, backbone) -> {(method, variant): {metric: mean}} with all of
    ACC, ECE and NLL."""
    cells: dict = defaultdict(dict)
    for r in rows:
        cells[(r["dataset"], r["backbone"], r["method"], r["variant"])][r["metric"]] = r["mean"]
    blocks: dict = defaultdict(dict)
    for (d, b, m, v), vals in cells.items():
        if all(k in vals for k in pub.METRICS):
            blocks[(d, b)][(m, v)] = vals
    return blocks


def claims(ours, reference: list[dict] | None = None) -> list[dict]:
    """Every claim on every (dataset, backbone) block of our runs; `paper` is
    the same claim on the published numbers of that block ('' where the
    paper has no such block, 'erratum' where its numbers are known wrong)."""
    reference = pub.reference() if reference is None else reference
    mine = block_means(as_rows(ours))
    paper = block_means(r for r in reference if r["judge"])
    broken = {(r["dataset"], r["backbone"]) for r in reference if not r["judge"]}
    out = []
    for block in sorted(mine):
        for key, text in CLAIMS.describe():
            fn = CLAIMS.get(key)
            held, numbers = fn(mine[block])
            p_held, p_numbers = fn(paper[block]) if block in paper else (None, "")
            if block in broken and key.startswith("4hml+ts"):
                p_held, p_numbers = None, "erratum"
            out.append({"dataset": block[0], "backbone": block[1], "claim": key, "text": text,
                        "held": held, "numbers": numbers, "paper_held": p_held,
                        "paper_numbers": p_numbers})
    return out
