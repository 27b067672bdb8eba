"""mhml-bench: reproduce and extend 'Multi-Head Multi-Loss Model Calibration'."""
__version__ = "0.1.0"
