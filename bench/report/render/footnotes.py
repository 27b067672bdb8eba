"""The footnotes that say how a calibrated table's numbers were computed
(the TS and post-hoc tables, issue 39): what their un-scaled rows average,
what each calibrator fits and on what, how a zero probability enters NLL,
and which records a calibrated row leaves out or was fitted too thinly on.
Plain text; bench.report.render.latex and bench.report.render.textables print them last.
"""
from __future__ import annotations

from bench.calib import variants as V
from bench.core.paper import METHOD_SOURCES
from bench.report.render.tables import Table, method_name


def validation_note(labels: list[str]) -> str:
    """The footnote of a calibrated table (ts, posthoc) whose dataset has
    records without validation arrays: their calibrated rows are left out."""
    return (f"Calibrated rows (fitted on the validation split) leave out {len(labels)} "
            f"record(s) without validation arrays (an earlier record format), whose un-scaled "
            f"rows are shown: {', '.join(labels)}")


def thin_note(lines: list[str]) -> str:
    """The footnote of calibrated rows fitted on a validation split too small
    for them (bench.report.numbers.aggregate.thin_validation's lines)."""
    return ("Fitted on a validation split too small for the calibrator (fewer samples than "
            "the numbers it fits, or a class without a sample; its rows are shown as "
            "computed): " + "; ".join(lines))


# Why a calibrated table's un-scaled row is not the main table's row of the
# same label (the paper's layout, kept: its appendix TS table does the same)
UNSCALED_NOTE = ("Un-scaled rows (no suffix): the heads' logits averaged, then one softmax "
                 "(T = 1), the input every calibrator is fitted on; the main table averages "
                 "the heads' softmax probabilities (paper eq. 1), so a multi-head method's "
                 "row shows other numbers there under the same label (a single head's are "
                 "the same)")
# How a probability of 0 for the true class enters NLL (bench.calib.measures.functions.nll)
NLL_ZERO_NOTE = ("NLL: p_y clipped to [eps, 1 - eps], eps = float32's 1.19e-07, before the "
                 "log: a test sample given p_y = 0 (histogram binning and isotonic regression "
                 "can give one) adds -log(eps) = 15.94 to the NLL sum, so that row's NLL "
                 "depends on the clip")


def calibrators_note(table: Table) -> str | None:
    """Each calibrator a post-hoc table shows: what it is and how it was fitted."""
    shown = {r.suffix for r in table.rows}
    found = [V.get(n) for n in V.posthoc() if V.get(n).label in shown]
    if not found:
        return None
    parts = [f"{v.label}: {v.help.split(';')[0]}" + (f" ({v.fitted})" if v.fitted else "")
             for v in found]
    return ("; ".join(parts) + "; each fitted on its run's validation split (the heads' "
            "logits averaged) and applied unchanged to its test split")


def sources_note(table: Table) -> str | None:
    """The source of each method of the table that bench.core.paper.METHOD_SOURCES
    names (the recent losses), in row order; None when it shows none."""
    keys = dict.fromkeys(r.method for r in table.rows if r.method in METHOD_SOURCES)
    if not keys:
        return None
    return "Sources: " + "; ".join(f"{method_name(k, table.names)}: {METHOD_SOURCES[k]}"
                                   for k in keys)


def table_notes(table: Table) -> list[str]:
    """What a calibrated table's numbers are computed from (ts, posthoc), the
    sources of its recent methods, then the notes bench.report.pipeline gives
    it per dataset; plain text, both
    renderers print them last."""
    out = [UNSCALED_NOTE] if table.spec.calibrated else []
    if table.spec.calibrators:
        out += [n for n in (calibrators_note(table), NLL_ZERO_NOTE) if n]
    return out + [n for n in (sources_note(table),) if n] + list(table.notes)
