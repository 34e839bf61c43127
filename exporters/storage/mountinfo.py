"""``<procfs>/self/mountinfo`` (the kernel's Documentation/filesystems/proc.rst, "/proc/<pid>/mountinfo"):
which mount point and file system a block device number holds, to name the devices of a cgroup's
``io.stat``."""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.storage.mounts import host_mountpoint, unescape


@dataclass(frozen=True, slots=True)
class DeviceMount:
    mountpoint: str
    fstype: str


def parse_mountinfo(text: str, rootfs: str = "/") -> dict[str, DeviceMount]:
    """``{"MAJ:MIN": DeviceMount}``. A device mounted several times (bind mounts, a container's volumes) is
    named by a mount of its file system's root (field 4 ``/``), the shortest such mount point; only where no
    mount shows its root, by the shortest of the others. Mounts outside ``rootfs`` (a containerised agent's
    own) are left out; malformed lines are skipped (the table is the kernel's, and a name is only a label)."""
    best: dict[str, tuple[bool, int, DeviceMount]] = {}
    for line in text.splitlines():
        fields = line.split()
        # id parent MAJ:MIN root mountpoint options [optional fields...] - fstype source superoptions
        if len(fields) < 8 or "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if sep + 1 >= len(fields):
            continue
        mountpoint = host_mountpoint(unescape(fields[4]), rootfs)
        if mountpoint is None:
            continue
        key = (fields[3] != "/", len(mountpoint), DeviceMount(mountpoint, fields[sep + 1]))
        if fields[2] not in best or key[:2] < best[fields[2]][:2]:
            best[fields[2]] = key
    return {device: entry[2] for device, entry in best.items()}
