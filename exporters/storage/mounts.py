"""The mount table, ``<procfs>/self/mounts`` (fstab format: device, mount point, type, options),
used to give Lustre instances a mount point label; and mount points as the host names them when the
agent sees the host's ``/`` under ``--path.rootfs``."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, TypeVar


@dataclass(frozen=True, slots=True)
class Mount:
    device: str
    mountpoint: str
    fstype: str


def unescape(field: str) -> str:
    # The kernel octal-escapes space, tab, newline and backslash in mount table fields (and in
    # mountstats' device and mount point: fs/proc_namespace.c, the same seq_escape set).
    if "\\" not in field:
        return field  # nearly every field: no escapes to undo
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def parse_mounts(text: str, fstype: str | None = None) -> list[Mount]:
    """Every mount, or only those of ``fstype`` (a container host lists hundreds of overlay and
    cgroup mounts that a Lustre lookup has no use for)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and (fstype is None or fields[2] == fstype):
            mounts.append(Mount(unescape(fields[0]), unescape(fields[1]), fields[2]))
    return mounts


def lustre_mountpoint(fsname: str, mounts: list[Mount]) -> str | None:
    """The mount point of Lustre filesystem ``fsname`` (device ``MGS@net:/fsname``), if exactly one."""
    found = {m.mountpoint for m in mounts
             if m.fstype == "lustre" and m.device.rpartition(":/")[2] == fsname}
    return found.pop() if len(found) == 1 else None


def host_mountpoint(mountpoint: str, rootfs: str) -> str | None:
    """``mountpoint`` as the host names it, or None for a mount outside ``rootfs``.

    The kernel names a mount relative to the reader's root: a containerised agent with the host's
    ``/`` at ``rootfs`` (``--path.rootfs``, mounted with HostToContainer propagation) sees the host's
    ``/mnt/data`` as ``/host/root/mnt/data``, next to its own container's mounts, which the host
    does not have."""
    if rootfs == "/":
        return mountpoint
    if mountpoint == rootfs:
        return "/"
    if mountpoint.startswith(rootfs + "/"):
        return mountpoint[len(rootfs):]
    return None


# Mount (this module) or NfsMount (mountstats): frozen dataclasses with a ``mountpoint`` field.
MountT = TypeVar("MountT")


def host_mounts(mounts: Iterable[MountT], rootfs: str) -> list[MountT]:
    """The mounts under ``rootfs``, renamed as the host names them; the container's own are dropped."""
    if rootfs == "/":
        return list(mounts)
    return [replace(m, mountpoint=host) for m in mounts
            if (host := host_mountpoint(m.mountpoint, rootfs)) is not None]
