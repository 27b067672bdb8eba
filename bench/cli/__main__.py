"""`python -m bench.cli`: the same as the `bench` command."""
import sys

from bench.cli.interrupt import quit_now, set_handler

set_handler(quit_now)  # Ctrl-C while the imports below run: one line, exit 130

from bench.cli.main import main  # noqa: E402 - after the handler, on purpose

sys.exit(main())
