"""`python -m bench.cli`: the same as the `bench` command."""
import sys

from bench.cli.main import main

sys.exit(main())
