"""Results as data, for your own analysis: `bench.results.load(results_dir)`
returns a pandas DataFrame with one row per finished run record, its columns
named as runs.csv names them: the keys, the test measures metrics.json holds
(`acc`, `ece`, `nll`, `brier`, `auc`, `gap`, fractions), cost and, computed
from each record's saved test logits, every other measure of
bench.calib.measures (`aece`, `cwece`, `dl2ce`, `smece`, `aurc`, `ece5` ...
`ece30`, and a plugin's) and the bootstrap bounds (`acc_boot_lo`, ...,
`dl2ce_boot_hi`, `boot_resamples`, `boot_seed`); beside them the validation
measures (`val_acc`, ...) and the config's settings (`train_*`, `param_*`).
See bench.report.numbers.frame and bench.report.numbers.cells. `shift(results_dir)` and
`ood(results_dir)`: the records' evaluation sets as tidy frames, the data of
`bench report --shift` / `--ood`; `sets(results_dir)`: conformal prediction
sets (`bench report --sets`)."""
import pandas as pd

from bench.calib import measures as _measures
from bench.core.record import COSTS, Record
from bench.report import ReportOptions, pipeline
from bench.report.evals import evalsets
from bench.report.evals import ood as ood_report
from bench.report.evals.setshift import LONG_COLUMNS
from bench.report.numbers import cells, frame
from bench.report.numbers.frame import damaged

METRICS = _measures.stored()  # the measures metrics.json holds (test: these names; val_*)


def load(results_dir, measures: bool = True, cache_dir=None):
    """One row per readable record under `results_dir`; `measures=False`
    leaves out the measures computed from the logits (faster); `cache_dir`:
    a folder to cache them in (as `bench report` does in its --out)."""
    df = frame.load(results_dir)
    if not measures or df.empty:
        return df

    cache = cells.cache_for(cache_dir) if cache_dir is not None else cells.Cache()
    recs = [Record(p) for p in df["path"]]
    rows = cells.run_rows([cells.Run(r, r.method) for r in recs], cache)
    keep = [k for k in rows[0] if k not in METRICS]  # the stored ones: metrics.json's
    out = df.assign(**{k: [r[k] for r in rows] for k in keep})
    cache.save()
    return out


def shift(results_dir, metrics: str | None = None, variants: str | None = None, no_ts=False,
          cache_dir=None):
    """The measures under shift as `bench report --shift` computes them, tidy
    (its shift/shift_long.csv): one row per dataset, backbone, method, variant
    (plain, ts unless `no_ts`, the calibrators of `variants`, dens), seed (none
    for D-Ens), corruption, severity, measure (ACC, the `metrics` columns or
    ECE and NLL, Gap) and value (a fraction). BenchError (one line) where no
    record has a shift set."""
    return _eval_frame(results_dir, "shift", cache_dir, metrics=metrics, variants=variants,
                       no_ts=no_ts)


def ood(results_dir, cache_dir=None):
    """OOD detection as `bench report --ood` computes it, tidy (its
    ood/ood_long.csv): dataset, backbone, method, variant, seed, ood_set,
    score (msp, entropy, mi), metric (auroc, aupr_in, aupr_out, fpr95), value."""
    return _eval_frame(results_dir, "ood", cache_dir)


def sets(results_dir, alpha: float = 0.1, *, variants: str | None = None, no_ts=False,
         cache_dir=None, eval_sets: bool = False, randomize: bool = False, seed: int = 0,
         top_label: bool = False):
    """Conformal prediction sets as `bench report --sets --sets-alpha ALPHA`
    computes them, tidy (its sets/sets_long.csv): one row per dataset,
    backbone, method, variant (plain, ts unless `no_ts`, the calibrators of
    `variants`, dens), seed (none for D-Ens), score (lac, aps, raps), alpha,
    measure (coverage, setsize, sscov, empty) and value (a fraction; set size
    in classes). `eval_sets=True`: the same on the records' shift and site
    sets (its sets/sets_shift_long.csv: eval_set, corruption, severity
    columns too; site sets have neither). `randomize`, `seed`, `top_label`:
    --sets-randomize, --sets-seed, --sets-top-label."""
    opts = ReportOptions(sets=True, sets_alpha=alpha, variants=variants, no_ts=no_ts,
                         no_plots=True, no_progress=True, sets_randomize=randomize,
                         sets_seed=seed, sets_top_label=top_label)
    opts.validate()
    runs, _, _ = pipeline.load(results_dir, opts)
    cache = cells.cache_for(cache_dir) if cache_dir is not None else cells.Cache()
    data = pipeline.sets_report(opts, runs, cache)
    cache.save()
    if eval_sets:
        return data.shifted.frame if data.shifted is not None else pd.DataFrame(
            columns=LONG_COLUMNS)
    return data.frame


def _eval_frame(results_dir, kind: str, cache_dir, **options):
    opts = ReportOptions(**{kind: True}, no_plots=True, no_progress=True, **options)
    opts.validate()
    runs, _, _ = pipeline.load(results_dir, opts)
    evalsets.require(runs, kind, results_dir)
    cache = cells.cache_for(cache_dir) if cache_dir is not None else cells.Cache()
    rep = (pipeline.shift_report(opts, runs, cache, {}, {}) if kind == "shift"
           else ood_report.compute(runs, cache))
    cache.save()
    return rep.frame


__all__ = ["load", "shift", "ood", "sets", "damaged", "METRICS", "COSTS"]
