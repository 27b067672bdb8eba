"""bench.sweep: many runs: grid expansion, the per-run worker, executors
(local joblib pool, SLURM via submitit), run state (locks, progress,
failures), the sweep driver, and the options and plan shared by `bench run`
and bench.api (options.RunOptions, plan.plan, run.run_sweep), with
TensorBoard event files written from finished records.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
