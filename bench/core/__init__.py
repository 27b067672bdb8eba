"""bench.core: the pieces every other package builds on, torch-free where possible.

errors (one exception type), registry (name -> factory), settings (how a
hyper-parameter is declared: range, choices, meaning, in the hash; one
validate), config (frozen hyper-parameter dataclasses, profiles, --set
parsing, the config hash),
metrics (pure ACC/ECE/NLL/AUC), calibration (temperature scaling and
ensembles on saved logits), store (run records on disk), paper (the paper's
methods, backbones and row order), provenance,
transfer (non-blocking host-to-device copies).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
