"""Deprecated: moved to bench.calib.metrics (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
