"""Writing files so that a concurrent reader never sees a half-written value.

Multi-line files (ethtool statistics, procfs, gpus.json) are replaced atomically: a temp file in
the same directory, then ``os.replace``. Single-value sysfs attributes are rewritten in place with
one ``pwrite`` at offset 0, because sysfs readers (the exporter, node_exporter's style) may hold
the descriptor open and ``pread`` it each scrape, the way real sysfs regenerates on every read;
a replaced file would leave such a reader on the old inode for ever. Counters only grow, so one
``pwrite`` of the new, never shorter text leaves no moment with a partial value; a shorter value
(a counter reset) is replaced atomically instead. Unchanged contents are not rewritten.
"""
from __future__ import annotations

import os
from pathlib import Path


class TreeWriter:
    def __init__(self) -> None:
        self._last: dict[str, bytes] = {}
        self.writes = 0

    def put(self, path: str, data: bytes) -> None:
        """Replace ``path`` atomically (directories are created on first write)."""
        if self._last.get(path) == data:
            return
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except FileNotFoundError:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._last[path] = data
        self.writes += 1

    def attr(self, path: str, data: bytes) -> None:
        """Rewrite a single-value sysfs attribute in place (see the module docstring)."""
        old = self._last.get(path)
        if old == data:
            return
        if old is None or len(data) < len(old):
            self.put(path, data)
            return
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        self._last[path] = data
        self.writes += 1
