"""Deprecated: moved to bench.calib.ood (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
