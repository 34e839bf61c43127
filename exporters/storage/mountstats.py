"""NFS client statistics from ``<procfs>/self/mountstats`` (format: kernel
``fs/nfs/super.c:nfs_show_stats`` and ``net/sunrpc/stats.c:rpc_clnt_show_stats``)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporters.storage.mounts import unescape

_DEVICE = re.compile(r"^device (?P<device>\S+) mounted on (?P<mount>\S+) with fstype (?P<fstype>\S+)")
_NFS_TYPES = ("nfs", "nfs4")


@dataclass(frozen=True, slots=True)
class NfsOp:
    """One line of ``per-op statistics``; times are converted from milliseconds to seconds."""

    op: str
    operations: int
    transmissions: int
    major_timeouts: int
    rtt_seconds: float
    execute_seconds: float

    @property
    def retransmissions(self) -> int:
        # ops counts completions and trans counts sends; a request in flight can make trans
        # briefly trail ops, which is not a negative retransmission.
        return max(self.transmissions - self.operations, 0)


@dataclass(frozen=True, slots=True)
class NfsMount:
    device: str
    mountpoint: str
    fstype: str
    # bytes: normal read, normal write, direct read, direct write (None: no bytes line seen)
    normal_read_bytes: int | None = None
    normal_write_bytes: int | None = None
    direct_read_bytes: int | None = None
    direct_write_bytes: int | None = None
    ops: tuple[NfsOp, ...] = field(default=())


def _parse_op(line: str) -> NfsOp | None:
    name, sep, rest = line.strip().partition(":")
    values = rest.split()
    if not sep or len(values) < 8 or not all(v.isdigit() for v in values[:8]):
        return None
    n = [int(v) for v in values[:8]]
    # fields: ops trans timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]
    return NfsOp(name, n[0], n[1], n[2], n[6] / 1000.0, n[7] / 1000.0)


def _finish(device: str, mount: str, fstype: str, lines: list[str]) -> NfsMount:
    byte_fields: list[int] = []
    ops: list[NfsOp] = []
    in_ops = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("bytes:"):
            byte_fields = [int(v) for v in stripped.split()[1:] if v.isdigit()]
        elif stripped == "per-op statistics":
            in_ops = True
        elif in_ops and (op := _parse_op(line)) is not None:
            ops.append(op)
    b: list[int | None] = [*byte_fields[:4], *[None] * (4 - len(byte_fields[:4]))]
    return NfsMount(device, mount, fstype, b[0], b[1], b[2], b[3], tuple(ops))


def parse_mountstats(text: str) -> list[NfsMount]:
    """Every NFS mount in ``mountstats``; other filesystems are skipped."""
    mounts: list[NfsMount] = []
    current: tuple[str, str, str] | None = None
    lines: list[str] = []
    for line in text.splitlines() + ["device end mounted on end with fstype end"]:
        header = _DEVICE.match(line)
        if header is None:
            lines.append(line)
            continue
        if current is not None and current[2] in _NFS_TYPES:
            mounts.append(_finish(*current, lines))
        current, lines = (unescape(header["device"]), unescape(header["mount"]), header["fstype"]), []
    return mounts
