"""Deprecated: moved to bench.calib.variants (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
