"""Dataset adapters, one file each, registered by explicit import.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
from .base import DATASETS, DatasetBundle, Split, load_dataset  # noqa: F401
from . import digits  # noqa: F401
from . import medmnist  # noqa: F401  (pathmnist and the other 2D MedMNIST flags)
from . import chaoyang  # noqa: F401
from . import kvasir  # noqa: F401
from . import custom  # noqa: F401  (csv, folder)
from .filelist import FILE_INDEXES  # noqa: F401
