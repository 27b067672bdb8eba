"""bench.cli: the `bench` command line (list, run, data check, report), thin
over the packages below it.

What it may import: the README's "Layout" table (tests/test_layout.py enforces it).
"""
