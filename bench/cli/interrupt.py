"""Ctrl-C at any moment of a `bench` command: one line, exit status 130, no
traceback (standard library only, so it is in place before anything heavy
is imported).

While a command starts (torch and the registries import for seconds) and
after it has ended, nothing needs unwinding: `quit_now` says the line and
leaves at once. While the command runs, Ctrl-C is Python's KeyboardInterrupt,
so locks are released and child processes stopped on the way out
(bench.cli.main catches it and says the same line)."""
from __future__ import annotations

import os
import signal
import threading

INTERRUPTED = "bench: interrupted; finished seeds are saved, rerun to continue"


def quit_now(signum=None, frame=None) -> None:
    """Say the line and exit 130 at once: nothing has been written yet (start-up)
    or everything has (shut-down)."""
    os.write(2, (INTERRUPTED + "\n").encode())
    os._exit(130)


def set_handler(handler):
    """signal.signal(SIGINT, handler) where this thread may (the main one);
    returns the handler it replaced, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, handler)
