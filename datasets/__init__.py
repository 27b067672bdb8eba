"""Dataset adapters, one file each, registered by explicit import."""
from .base import DATASETS, DatasetBundle, Split, load_dataset  # noqa: F401
from . import digits  # noqa: F401
