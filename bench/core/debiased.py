"""Deprecated: moved to bench.calib.debiased (bench.core.moved)."""
from bench.core.moved import alias

alias(__name__)
