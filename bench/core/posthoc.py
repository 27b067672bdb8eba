"""Deprecated: moved to bench.calib.posthoc (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
