"""bench.calib: the calibration maths, numpy and scipy in, numbers out.

metrics (ACC, ECE, NLL, AUC, softmax), calibration (temperature scaling and
ensembles on saved logits), calibration_measures (binned and smooth
calibration errors, bootstrap intervals), debiased (the debiased top-label
L2 calibration error), measures (the Measure registry: every column a report
can show), posthoc (calibrators fitted on validation logits), variants (the
Variant registry: every way a report turns logits into probabilities), ood
(the OOD score registry and the detection metrics), conformal (split
conformal prediction sets and their score registry).

Nothing here trains, reads a record or knows a dataset: every function takes
arrays. The registries here (measures, variants, OOD and conformal scores)
take plugins the way bench.core's registries do (bench.plugins).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
