"""bench.core: the pieces every other package builds on, torch-free where possible.

errors (one exception type), registry (name -> factory), config (frozen
hyper-parameter dataclasses, profiles, --set parsing, the config hash),
metrics (pure ACC/ECE/NLL/AUC), calibration (temperature scaling and
ensembles on saved logits), store (run records on disk), provenance,
transfer (non-blocking host-to-device copies).

May import: the standard library and third-party packages only. Nothing in
core imports another bench package, or the methods/datasets plugins.
"""
