"""bench.calib: the calibration maths, numpy and scipy in, numbers out.

measures (every measure a report can show: the Measure registry, the
measure functions, their bootstrap and seed intervals, dl2ce's vectorised
resampler), metrics (what training computes from logits: softmax, the
heads' mean, the checkpoint AUC), temperature (temperature scaling and deep
ensembles on saved logits), posthoc (calibrators fitted on validation
logits), variants (the Variant registry: every way a report turns logits
into probabilities), ood (the OOD score registry and the detection
metrics), conformal (split conformal prediction sets and their score
registry).

Nothing here trains, reads a record or knows a dataset: every function takes
arrays. The registries here (measures, variants, OOD and conformal scores)
take plugins the way bench.core's registries do (bench.plugins).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
