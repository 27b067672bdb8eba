"""bench.sweep: many runs: grid expansion, the per-run worker, executors
(local joblib pool, SLURM via submitit), run state (locks, progress,
failures) and the sweep driver.

May import: bench.core, bench.train and the plugins. Never report, speed or cli.
"""
