"""Training methods, one file each, registered by explicit import."""
from .base import METHODS, Method, create_method, method_params  # noqa: F401
from . import sl1h  # noqa: F401
