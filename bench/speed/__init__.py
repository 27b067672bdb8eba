"""bench.speed: measuring tools, not part of a run: perf (harness vs the
released pipeline), steptime (times the training loop's real step),
gpuplan and projection (GPU step times -> grid hours), syncs (host-device
syncs per step), sidebyside (K processes on one GPU).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
