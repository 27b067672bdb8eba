"""bench.train: turning one run (or one fused group of runs) into a record.

backbones and weights (the models and their initial weights), augment
(per-image TrivialAugmentWide on batches), loop (the one training loop),
fused (several runs of one architecture as one vmapped model), groups
(which runs fuse, and their records), experiment (what defines a run, and
training one seed into a record).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
