"""Results as data, for your own analysis: `bench.results.load(results_dir)`
returns a pandas DataFrame with one row per finished run record (config
columns, test_/val_ metrics as fractions, cost). See bench.report.frame."""
from bench.report.frame import COSTS, METRICS, damaged, load

__all__ = ["load", "damaged", "METRICS", "COSTS"]
