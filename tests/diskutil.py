"""A disk that fills up mid-write, for the full-disk tests: every file opened
for writing through the patched `open` takes `room` bytes (short writes),
then raises OSError(ENOSPC), as a real filesystem does."""
from __future__ import annotations

import builtins
import errno
import io
import os


class NearlyFull(io.RawIOBase):
    """A file on a disk with `room` bytes left."""

    def __init__(self, room: int):
        self.room = room

    def writable(self):
        return True

    def write(self, data):
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = min(self.room, len(memoryview(data)))
        self.room -= n
        return n


def full_disk_open(room: int):
    """An `open` whose writes fill the disk after `room` bytes; the file is
    still created (as on a real disk), reads are untouched. Safe to patch
    over builtins.open (it keeps the real one)."""
    real_open = builtins.open

    def opener(path, mode="r", *args, **kwargs):
        if "w" in mode:
            real_open(path, mode).close()
            raw = io.BufferedWriter(NearlyFull(room))
            return raw if "b" in mode else io.TextIOWrapper(raw, encoding="utf-8")
        return real_open(path, mode, *args, **kwargs)

    return opener
