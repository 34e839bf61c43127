"""Storage parsers on the real captured fixtures (values read off the fixture files by hand)."""
from __future__ import annotations

import re

from lockstep.exporters.storage.diskstats import DEFAULT_INCLUDE, parse_diskstats
from lockstep.exporters.storage.llite import fsname_of, parse_lctl_stats, parse_llite_stats
from lockstep.exporters.storage.mounts import host_mountpoint, host_mounts, lustre_mountpoint, parse_mounts
from lockstep.exporters.storage.mountstats import parse_mountstats
from tests.helpers.paths import FIXTURES

PROC = FIXTURES / "procfs"
LLITE = PROC / "fs/lustre/llite/lustrefs-ffff88105db50000/stats"


def test_llite_byte_sums_and_calls_come_from_the_sum_and_samples_fields():
    s = parse_llite_stats(LLITE.read_text())
    # write_bytes 89467810 samples [bytes] 4096 1048576 93813797294080
    assert (s.write_calls, s.write_bytes) == (89467810, 93813797294080)
    assert (s.read_calls, s.read_bytes) == (1, 4194304)
    ops = dict(s.metadata_ops)
    assert ops == {"open": 136, "close": 96, "readdir": 12, "truncate": 134, "getattr": 41,
                   "getxattr": 85, "removexattr": 134}
    assert "inode_permission" not in ops and "getxattr_hits" not in ops


def test_lctl_dump_keeps_only_llite_blocks_and_has_no_byte_lines():
    stats = parse_lctl_stats((FIXTURES / "lustre/lctl-2.14/llite_client.txt").read_text())
    assert list(stats) == ["ai400x2-ff47bce9ca35d800"]
    s = stats["ai400x2-ff47bce9ca35d800"]
    assert s.read_bytes is None and s.write_bytes is None and s.read_calls is None  # absent, not zero
    ops = dict(s.metadata_ops)
    assert ops["open"] == 35955554 and ops["mkdir"] == 17987059 and ops["statfs"] == 17864
    assert ops["setxattr"] == 1
    assert "req_waittime" not in ops and "ioctl" not in ops and "opencount" not in ops


def test_fsname_and_mount_point_resolution():
    assert fsname_of("lustrefs-ffff88105db50000") == "lustrefs"
    assert fsname_of("ai400x2-ff47bce9ca35d800") == "ai400x2"
    assert fsname_of("scratch") == "scratch"
    mounts = parse_mounts((PROC / "self/mounts").read_text())
    assert lustre_mountpoint("lustrefs", mounts) == "/lustre"
    assert lustre_mountpoint("ai400x2", mounts) is None
    assert "/local scratch" in {m.mountpoint for m in mounts}
    twice = mounts + [m for m in parse_mounts("mgs@tcp:/lustrefs /lustre2 lustre rw 0 0")]
    assert lustre_mountpoint("lustrefs", twice) is None
    only = parse_mounts((PROC / "self/mounts").read_text(), "lustre")
    assert [(m.device, m.mountpoint) for m in only] == [("10.10.0.1@o2ib:10.10.0.2@o2ib:/lustrefs", "/lustre")]


def test_host_mountpoint_strips_the_rootfs_and_drops_mounts_outside_it():
    assert host_mountpoint("/host/root/mnt/data", "/host/root") == "/mnt/data"
    assert host_mountpoint("/host/root", "/host/root") == "/"
    assert host_mountpoint("/data", "/host/root") is None  # the container's own mount
    assert host_mountpoint("/host/rootless/x", "/host/root") is None  # a prefix, not a parent directory
    assert host_mountpoint("/mnt/data", "/") == "/mnt/data"


def test_host_mounts_of_a_container_mount_table():
    table = parse_mounts((FIXTURES / "procfs-rootfs/self/mounts").read_text())
    host = host_mounts(table, "/host/root")
    # exactly the host's own table (unescaped before the prefix is stripped: "/local scratch")
    assert set(host) == set(parse_mounts((PROC / "self/mounts").read_text()))
    assert host_mounts(table, "/") == table


def test_mountstats_nfs4_mount():
    (mount,) = parse_mountstats((PROC / "self/mountstats").read_text())
    assert (mount.device, mount.mountpoint, mount.fstype) == ("192.168.1.1:/srv/test", "/mnt/nfs/test", "nfs4")
    # bytes:	1207640230 0 0 0 1210214218 0 295483 0
    assert (mount.normal_read_bytes, mount.normal_write_bytes) == (1207640230, 0)
    assert (mount.direct_read_bytes, mount.direct_write_bytes) == (0, 0)
    ops = {op.op: op for op in mount.ops}
    assert list(ops) == ["NULL", "READ", "WRITE", "ACCESS"]
    read = ops["READ"]  # READ: 1298 1298 0 207680 1210292152 6 79386 79407
    assert (read.operations, read.transmissions, read.retransmissions) == (1298, 1298, 0)
    assert (read.rtt_seconds, read.execute_seconds) == (79.386, 79.407)
    # ACCESS: 2927395007 2927394995 ...: transmissions trail completions, no negative retransmits
    assert ops["ACCESS"].retransmissions == 0


def test_mountstats_blocks_split_on_device_lines_only():
    text = (PROC / "self/mountstats").read_text()
    # a second NFS mount (escaped space in its mount point) after a local one, no per-op section
    extra = ("device /dev/sdb1 mounted on /data with fstype xfs\n"
             "device srv:/b mounted on /mnt/my\\040b with fstype nfs statvers=1.1\n"
             "\tbytes:\t5 6 7 8 0 0 0 0\n")
    mounts = parse_mountstats(text + extra)
    assert [(m.device, m.mountpoint, m.fstype) for m in mounts] == \
        [("192.168.1.1:/srv/test", "/mnt/nfs/test", "nfs4"), ("srv:/b", "/mnt/my b", "nfs")]
    last = mounts[1]
    assert (last.normal_read_bytes, last.direct_write_bytes, last.ops) == (5, 8, ())
    assert len(mounts[0].ops) == 4  # the next device line ends the first mount's per-op section


def test_nfs_mount_point_with_a_space_matches_the_mount_table():
    """Before: mountstats' octal escapes (``\\040`` for a space, as in /proc/self/mounts) reached the
    ``mount`` label, so an NFS mount point with a space differed from the same path everywhere else."""
    text = ("device 10.0.0.20:/export/my\\040home mounted on /mnt/my\\040home with fstype nfs4 statvers=1.1\n"
            "\tbytes:\t1 2 3 4 5 6 7 8\n")
    (mount,) = parse_mountstats(text)
    assert (mount.device, mount.mountpoint, mount.normal_read_bytes) == ("10.0.0.20:/export/my home", "/mnt/my home", 1)
    table = parse_mounts("10.0.0.20:/export/my\\040home /mnt/my\\040home nfs4 rw 0 0\n")
    assert table[0].mountpoint == mount.mountpoint


def test_diskstats_default_filter_keeps_whole_disks():
    disks = {d.device: d for d in parse_diskstats((PROC / "diskstats").read_text(), re.compile(DEFAULT_INCLUDE))}
    assert sorted(disks) == ["nvme0n1", "sda", "sdb", "sdc", "vda"]
    nvme = disks["nvme0n1"]  # 259 0 nvme0n1 47114 4 4643973 21650 1078320 43950 39451633 1011053 0 222766 1032546
    assert (nvme.reads, nvme.read_bytes, nvme.read_seconds) == (47114, 4643973 * 512, 21.65)
    assert (nvme.writes, nvme.write_bytes, nvme.write_seconds) == (1078320, 39451633 * 512, 1011.053)
    assert nvme.io_seconds == 222.766
    every = parse_diskstats((PROC / "diskstats").read_text())
    assert "nvme0n1p1" in {d.device for d in every} and "ram0" in {d.device for d in every}
