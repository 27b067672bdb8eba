"""bench.cli: the `bench` command line (list, run, data check, report), thin
over the packages below it.

May import: anything in bench. Nothing imports bench.cli.
"""
