"""mhml-bench plugin: the confidence penalty (Pereyra et al. 2017), a toy
stripes dataset and a tiny CNN backbone, each in its own module.

Importing this package registers `confpen`, `stripes` and `tinycnn`; the
harness imports it through the entry point in pyproject.toml (group
`mhml_bench.plugins`)."""
from . import backbone, data, method  # noqa: F401  (each registers on import)
