"""Results as data, for your own analysis: `bench.results.load(results_dir)`
returns a pandas DataFrame with one row per finished run record (config
columns, test_/val_ metrics as fractions, cost) and, computed from each
record's saved test logits, every other measure of bench.core.measures
(`test_aece`, `test_cwece`, `test_dl2ce`, `test_smece`, `test_aurc`,
`test_ece5` ... `test_ece30`, and a plugin's) and the bootstrap bounds of
ACC / ECE / NLL (`test_acc_boot_lo`, ..., `boot_resamples`, `boot_seed`).
See bench.report.frame and bench.report.cells."""
from bench.core import measures as _measures
from bench.core.record import COSTS
from bench.report import frame
from bench.report.frame import damaged

METRICS = _measures.stored()  # the test_/val_ columns metrics.json holds


def load(results_dir, measures: bool = True, cache_dir=None):
    """One row per readable record under `results_dir`; `measures=False`
    leaves out the measures computed from the logits (faster); `cache_dir`:
    a folder to cache them in (as `bench report` does in its --out)."""
    df = frame.load(results_dir)
    if not measures or df.empty:
        return df
    from bench.core.record import Record
    from bench.report import cells

    cache = cells.cache_for(cache_dir) if cache_dir is not None else cells.Cache()
    recs = [Record(p) for p in df["path"]]
    rows = cells.run_rows([cells.Run(r, r.method) for r in recs], cache)
    keep = [k for k in rows[0] if k not in METRICS]
    out = df.assign(**{(k if k.startswith("boot_") else f"test_{k}"): [r[k] for r in rows]
                       for k in keep})
    cache.save()
    return out


__all__ = ["load", "damaged", "METRICS", "COSTS"]
