"""Small attribute files read through descriptors held open between scrapes.

sysfs regenerates an attribute's value on every read at offset 0, so ``os.pread(fd, n, 0)`` on a held
descriptor returns the current value at a small fraction of what ``open().read()`` costs (the figures:
docs/architecture.md, performance notes). A descriptor goes stale when the device goes away (``ENODEV``/``ENXIO`` on hot-unplug or
driver reload): it is reopened once, and a path that is gone reads as absent.

Fixture and simulator trees are regular files. Writers that replace one atomically (``os.replace``)
leave a held descriptor on the old inode, so for regular files the parent directory's mtime (which
every rename or unlink in it moves) is checked at the start of each scrape, and its descriptors reopened
when it moved; a value rewritten in place (how the simulator updates attributes) is seen like sysfs. (With
multigrain timestamps, Linux 6.13+ on ext4/xfs/tmpfs, a rename right after our check always moves the
mtime; older kernels may miss one landing in the same clock tick until the directory changes again.)
"""
from __future__ import annotations

import errno
import logging
import os

from lockstep.exporters.toolkit.logs import once

log = logging.getLogger("lockstep.fabric.sysfs")

_READ_SIZE = 4096  # one page: the most a sysfs attribute's show() may return
_GONE = (errno.ENOENT, errno.ENODEV, errno.ENXIO, errno.ESTALE)
# What drivers return for a counter they cannot read (newer kernels instead of "N/A (no PMA)").
_UNSUPPORTED = (errno.EINVAL, errno.EOPNOTSUPP, errno.EIO, errno.EAGAIN)
_DENIED = (errno.EACCES, errno.EPERM)


def _is_attribute(st: os.stat_result) -> bool:
    """kernfs reports every attribute as a 4096-byte file with no blocks; a regular file does not."""
    return st.st_size == _READ_SIZE and st.st_blocks == 0


def read_once(path: str) -> str | None:
    """A static attribute (board id, firmware) read at discovery: stripped text, or None if unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(_READ_SIZE).decode(errors="replace").strip()
    except OSError as exc:
        _report(path, exc)
        return None


def _report(path: str, exc: OSError) -> None:
    if exc.errno in _DENIED:
        once(log, logging.WARNING, path, "permission denied reading %s; treating it as absent", path)
    elif exc.errno not in _GONE and exc.errno not in _UNSUPPORTED and exc.errno != errno.EISDIR:
        once(log, logging.WARNING, path, "cannot read %s: %s", path, exc)


class HeldFiles:
    """``read(path)`` returns the raw bytes of an attribute, or None when it is absent or unreadable."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}  # path -> descriptor
        self._dirs: dict[str, int] = {}  # directory of held regular files -> its mtime_ns when checked

    def new_scrape(self) -> None:
        """Start of a scrape: directories of regular files that moved since the last check have their
        descriptors reopened (a no-op on sysfs, which holds no regular files)."""
        for directory, mtime in list(self._dirs.items()):
            now = self._mtime(directory)
            if now != mtime:
                self.forget(directory + "/")
                self._dirs[directory] = now

    def read(self, path: str) -> bytes | None:
        fd = self._held.get(path)
        if fd is not None:
            try:
                return os.pread(fd, _READ_SIZE, 0)
            except OSError as exc:
                self._drop(path)
                if exc.errno not in _GONE:
                    _report(path, exc)
                    return None
        # Not held yet, or its device went away (ENODEV/ENOENT: hot-unplug, driver reload): one fresh
        # open, whose failure is reported.
        fd = self._open(path)
        if fd is None:
            return None
        try:
            return os.pread(fd, _READ_SIZE, 0)
        except OSError as exc:
            self._drop(path)
            _report(path, exc)
            return None

    def _open(self, path: str) -> int | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            _report(path, exc)
            return None
        if not _is_attribute(os.fstat(fd)):
            parent = os.path.dirname(path)
            if parent not in self._dirs:
                self._dirs[parent] = self._mtime(parent)
        self._held[path] = fd
        return fd

    @staticmethod
    def _mtime(directory: str) -> int:
        try:
            return os.stat(directory).st_mtime_ns
        except OSError:
            return -1

    def _drop(self, path: str) -> None:
        fd = self._held.pop(path, None)
        if fd is not None:
            os.close(fd)

    def forget(self, prefix: str) -> None:
        """Close the descriptors under ``prefix`` (a device that disappeared)."""
        for path in [p for p in self._held if p.startswith(prefix)]:
            self._drop(path)
        for directory in [d for d in self._dirs if (d + "/").startswith(prefix)]:
            del self._dirs[directory]

    def __len__(self) -> int:
        return len(self._held)

    def close(self) -> None:
        for path in list(self._held):
            self._drop(path)
        self._dirs.clear()
