"""Deprecated: moved to bench.calib.conformal (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
