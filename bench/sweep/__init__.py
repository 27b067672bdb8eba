"""bench.sweep: many runs: grid expansion, the per-run worker, executors
(local joblib pool, SLURM via submitit), run state (locks, progress,
failures) and the sweep driver.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
