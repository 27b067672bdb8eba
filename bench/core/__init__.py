"""bench.core: the pieces every other package builds on, torch-free where possible.

errors (one exception type), registry (name -> factory), plugins (loading
them, and where a registered entry's code came from), settings (how a
hyper-parameter is declared: range, choices, meaning, in the hash; one
validate), config and flags (frozen hyper-parameter dataclasses, profiles,
--set parsing, the config hash), store, record and files (run records on
disk), paper (the paper's methods, backbones and row order), provenance,
transfer (non-blocking host-to-device copies).

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
