"""Deprecated: moved to bench.calib.calibration (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
