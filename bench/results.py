"""Results as data, for your own analysis: `bench.results.load(results_dir)`
returns a pandas DataFrame with one row per finished run record (config
columns, test_/val_ metrics as fractions, cost) and, computed from each
record's saved test logits, every calibration measure of `bench report`
(`test_aece`, `test_cwece`, `test_dl2ce`, `test_smece`, `test_aurc`,
`test_ece5` ... `test_ece30`) and the bootstrap bounds of ACC / ECE / NLL
(`test_acc_boot_lo`, ..., `boot_resamples`, `boot_seed`). See
bench.report.frame and bench.report.measures."""
from bench.report.frame import COSTS, METRICS, damaged
from bench.report import frame


def load(results_dir, measures: bool = True, cache_dir=None):
    """One row per readable record under `results_dir`; `measures=False`
    leaves out the measures computed from the logits (faster); `cache_dir`:
    a folder to cache them in (as `bench report` does in its --out)."""
    df = frame.load(results_dir)
    if not measures or df.empty:
        return df
    from bench.report import measures as ms

    cache = ms.cache_for(cache_dir) if cache_dir is not None else None
    out = ms.test_columns(df, cache)
    if cache is not None:
        cache.save()
    return out


__all__ = ["load", "damaged", "METRICS", "COSTS"]
