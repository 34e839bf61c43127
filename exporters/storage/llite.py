"""Lustre client (llite) statistics: ``<procfs>/fs/lustre/llite/<fs>-<id>/stats`` (old clients),
``<sysfs>/kernel/debug/lustre/llite/<fs>-<id>/stats`` (>= 2.12, root only) and the same blocks as
printed by ``lctl get_param llite.*.stats``.

A stats line is ``name  COUNT samples [unit] [min max sum [sumsq]]``. For ``read_bytes`` and
``write_bytes`` the sum is the byte count and COUNT the number of calls."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lockstep.exporters.numbers import is_uint

# Entries of the llite stats that are metadata operations (lprocfs_llite_stats names). Data path
# entries (read, write, mmap, page_fault, seek, ioctl) and derived ones (opencount,
# openclosetime, getxattr_hits, inode_permission: a mostly cached VFS check) are left out.
METADATA_OPS = frozenset({
    "open", "close", "readdir", "setattr", "truncate", "flock", "getattr", "create", "link", "unlink",
    "symlink", "mkdir", "rmdir", "mknod", "rename", "statfs", "setxattr", "getxattr", "listxattr",
    "removexattr", "fsync", "fallocate",
})
_LCTL_HEADER = re.compile(r"^llite\.(?P<instance>[^=\s]+)\.stats=\s*$")


@dataclass(frozen=True, slots=True)
class LliteStats:
    """One llite instance. ``None``: the client did not report the entry (absent, not zero)."""

    read_bytes: int | None
    write_bytes: int | None
    read_calls: int | None
    write_calls: int | None
    metadata_ops: tuple[tuple[str, int], ...]


def fsname_of(instance: str) -> str:
    """``lustrefs-ffff88105db50000`` -> ``lustrefs`` (the suffix is the client's superblock id)."""
    name, sep, suffix = instance.rpartition("-")
    return name if sep and suffix and all(c in "0123456789abcdef" for c in suffix) else instance


def parse_llite_stats(text: str) -> LliteStats:
    """Parse one llite ``stats`` file (or one ``lctl get_param`` block). A line whose count or sum
    is not a counter (corrupt, or past u64) loses that entry, or that sum, alone."""
    counts: dict[str, int] = {}
    sums: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[2] != "samples" or not is_uint(fields[1]):
            continue  # snapshot_time, start_time, elapsed_time, blank lines and corrupt counts
        counts[fields[0]] = int(fields[1])
        if len(fields) >= 7 and is_uint(fields[6]):
            sums[fields[0]] = int(fields[6])
    ops = tuple(sorted((op, n) for op, n in counts.items() if op in METADATA_OPS))
    return LliteStats(
        read_bytes=sums.get("read_bytes"), write_bytes=sums.get("write_bytes"),
        read_calls=counts.get("read_bytes"), write_calls=counts.get("write_bytes"), metadata_ops=ops)


def parse_lctl_stats(text: str) -> dict[str, LliteStats]:
    """Split ``lctl get_param llite.*.stats`` output into instances; other parameters are skipped."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = _LCTL_HEADER.match(line)
        if header:
            current = blocks.setdefault(header["instance"], [])
        elif "=" in line.split(" ", 1)[0]:
            current = None  # another parameter (memused=..., ldlm.services...stats=) starts here
        elif current is not None:
            current.append(line)
    return {instance: parse_llite_stats("\n".join(lines)) for instance, lines in blocks.items()}
