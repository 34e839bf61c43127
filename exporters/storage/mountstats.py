"""NFS client statistics from ``<procfs>/self/mountstats`` (format: kernel
``fs/nfs/super.c:nfs_show_stats`` and ``net/sunrpc/stats.c:rpc_clnt_show_stats``)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lockstep.exporters.numbers import uint
from lockstep.exporters.storage.mounts import unescape

_DEVICE = re.compile(r"(?P<device>\S+) mounted on (?P<mount>\S+) with fstype (?P<fstype>\S+)")
_BYTES = re.compile(r"^\s*bytes:(.*)$", re.M)
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
    if not sep or len(values) < 8:
        return None
    try:
        n = [uint(v) for v in values[:8]]
    except ValueError:
        return None  # a corrupt line loses that operation
    # fields: ops trans timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]
    return NfsOp(name, n[0], n[1], n[2], n[6] / 1000.0, n[7] / 1000.0)


def _parse_mount(device: str, mount: str, fstype: str, body: str) -> NfsMount:
    bytes_line = _BYTES.search(body)
    byte_fields = [uint(v) for v in bytes_line[1].split()[:4]] if bytes_line else []
    b: list[int | None] = [*byte_fields, *[None] * (4 - len(byte_fields))]
    per_op = body.find("per-op statistics\n")
    lines = body[per_op:].splitlines()[1:] if per_op >= 0 else []
    ops = tuple(op for line in lines if (op := _parse_op(line)) is not None)
    return NfsMount(device, mount, fstype, b[0], b[1], b[2], b[3], ops)


def parse_mountstats(text: str, errors: list[str] | None = None) -> list[NfsMount]:
    """Every NFS mount in ``mountstats``; other filesystems are skipped. A mount whose ``bytes:``
    line is corrupt is skipped alone (named in ``errors``); a corrupt per-op line loses that op."""
    mounts: list[NfsMount] = []
    # A block starts with its "device ... mounted on ... with fstype ..." line; most mounts (proc,
    # sysfs, cgroups, local disks) are that line alone.
    for block in ("\n" + text).split("\ndevice ")[1:]:
        header, _, body = block.partition("\n")
        h = _DEVICE.match(header)
        if h is None or h["fstype"] not in _NFS_TYPES:
            continue
        try:
            mounts.append(_parse_mount(unescape(h["device"]), unescape(h["mount"]), h["fstype"], body))
        except ValueError as exc:
            if errors is not None:
                errors.append(f"{unescape(h['mount'])}: {exc}")
    return mounts
