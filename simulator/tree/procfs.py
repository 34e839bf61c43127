"""``DIR/<node>/proc/...``: Lustre llite stats (old-client procfs layout, as in
fixtures/lustre/procfs), ``self/mountstats`` (NFSv4, as fixtures/procfs/mountstats),
``self/mounts``, ``self/mountinfo`` and ``diskstats`` (17-field kernel >= 5.5 lines, as fixtures/procfs/diskstats),
``net/fib_trie`` (the kernel's IPv4 routing trie: loopback and the node's address, ``Topology.address``).
The values are those of ``signals.STORAGE``; a Lustre metadata op of the table gets its stats line."""
from __future__ import annotations

import os

from lockstep.exporters.catalog import storage as S
from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator.signals import LUSTRE, NFS, STORAGE
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology
from lockstep.simulator.tree.files import TreeWriter

RPC = 1 << 20
# The Lustre metadata ops of the table, by the name of their stats line
LUSTRE_OPS = tuple((signal.label("op"), signal) for signal in STORAGE
                   if signal.metric is S.METADATA_OPS and signal.label("fstype") == LUSTRE["fstype"])


def llite_dir(topo: Topology, node_index: int) -> str:
    return f"{LUSTRE['fsname']}-ffff{0x9e3c00000000 + node_index * 0x1000:012x}"


def lustre_stats(s: State, n: int, timestamp: float) -> bytes:
    def st(k):
        return int(s.storage[k][n])
    lines = [f"{'snapshot_time':<25} {timestamp:.9f} secs.nsecs"]
    for kind in ("read", "write"):
        samples, total = st(f"lustre_{kind}_samples"), st(f"lustre_{kind}_bytes")
        if samples:
            lines.append(f"{kind + '_bytes':<25} {samples} samples [bytes] {min(4096, total)} {min(RPC, total)} {total}")
    for op, signal in LUSTRE_OPS:
        if count := int(signal.raw(s)[n]):
            lines.append(f"{op:<25} {count} samples [regs]")
    return ("\n".join(lines) + "\n").encode()


def mountstats(s: State, n: int, age: int) -> bytes:
    def st(k):
        return int(s.storage[k][n])
    rd, wr = st("nfs_read_bytes"), st("nfs_write_bytes")
    ops = {op: st(f"nfs_{op}") for op in ("READ", "WRITE", "GETATTR", "ACCESS", "OPEN", "CLOSE")}
    per_op = "".join(
        f"\t{op:>12}: {c} {c} 0 {c * 200 + (wr if op == 'WRITE' else 0)} {c * 120 + (rd if op == 'READ' else 0)} "
        f"{c // 10} {c * 3 // 10} {c * 4 // 10}\n" for op, c in (("NULL", 0), *ops.items()))
    return (
        "device rootfs mounted on / with fstype rootfs\n"
        "device proc mounted on /proc with fstype proc\n"
        "device sysfs mounted on /sys with fstype sysfs\n"
        "device /dev/nvme0n1p2 mounted on / with fstype ext4\n"
        f"device 10.0.0.10@o2ib:/{LUSTRE['fsname']} mounted on {LUSTRE['mount']} with fstype lustre\n"
        f"device {NFS['fsname']} mounted on {NFS['mount']} with fstype nfs4 statvers=1.1\n"
        "\topts:\trw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,acregmax=60,acdirmin=30,"
        "acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.1.5,local_lock=none\n"
        f"\tage:\t{age}\n"
        "\tcaps:\tcaps=0x3ffbffff,wtmult=512,dtsize=1048576,bsize=0,namlen=255\n"
        "\tnfsv4:\tbm0=0xfdffbfff,bm1=0x40f9be3e,bm2=0x60800,acl=0x3,sessions,pnfs=not configured\n"
        "\tsec:\tflavor=1,pseudoflavor=1\n"
        f"\tevents:\t{ops['GETATTR']} {ops['ACCESS']} 0 0 {ops['OPEN']} 0 {ops['ACCESS']} {ops['WRITE']} 0 "
        f"{ops['READ']} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        f"\tbytes:\t{rd} {wr} 0 0 {rd} {wr} {rd // 4096} {wr // 4096}\n"
        "\tRPC iostats version: 1.1  p/v: 100003/4 (nfs)\n"
        f"\txprt:\ttcp 832 1 1 0 0 {sum(ops.values())} {sum(ops.values())} 0 {sum(ops.values())} 0 2 0 0\n"
        "\tper-op statistics\n" + per_op + "\n").encode()


def mounts() -> bytes:
    return ("/dev/nvme0n1p2 / ext4 rw,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
            "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
            f"10.0.0.10@o2ib:/{LUSTRE['fsname']} {LUSTRE['mount']} lustre rw,flock,lazystatfs 0 0\n"
            f"{NFS['fsname']} {NFS['mount']} nfs4 rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,hard 0 0\n"
            "/dev/nvme1n1 /scratch xfs rw,noatime 0 0\n").encode()


def mountinfo() -> bytes:
    """The mounts of ``mounts()`` with their device numbers: the job-io collector names a cgroup's devices by them."""
    return ("20 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
            "21 20 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
            "22 20 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
            f"60 20 0:52 / {LUSTRE['mount']} rw,relatime shared:40 - lustre 10.0.0.10@o2ib:/{LUSTRE['fsname']} "
            "rw,flock,lazystatfs\n"
            f"61 20 0:53 / {NFS['mount']} rw,relatime shared:41 - nfs4 {NFS['fsname']} rw,vers=4.2,rsize=1048576,"
            "wsize=1048576,hard,proto=tcp\n"
            "62 20 259:3 / /scratch rw,noatime shared:42 - xfs /dev/nvme1n1 rw,attr2,inode64,noquota\n").encode()


def diskstats(s: State, n: int) -> bytes:
    def st(k):
        return int(s.storage[k][n])
    r, rs, rms = st("nvme_reads"), st("nvme_read_sectors"), st("nvme_read_ms")
    w, ws, wms, io = st("nvme_writes"), st("nvme_write_sectors"), st("nvme_write_ms"), st("nvme_io_ms")
    return (
        "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        f" 259       0 nvme0n1 48211 12 4702113 21870 {w // 4 + 1034410} 43950 {ws // 4 + 39451633} "
        f"{wms // 4 + 1011053} 0 {io // 8 + 222766} {io // 8 + 1032546} 0 0 0 0 18811 2021\n"
        f" 259       1 nvme0n1p1 1140 0 9370 16 1 0 1 0 0 16 16 0 0 0 0 0 0\n"
        f" 259       2 nvme0n1p2 45914 4 4631243 21626 {w // 4 + 1036885} 43950 {ws // 4 + 39451632} "
        f"{wms // 4 + 919480} 0 {io // 8 + 131580} {io // 8 + 940970} 0 0 0 0 0 0\n"
        f" 259       3 nvme1n1 {r} 0 {rs} {rms} {w} 0 {ws} {wms} 0 {io} {rms + wms} 0 0 0 0 {w // 50} {wms // 50}\n"
    ).encode()


def fib_trie(address: str) -> bytes:
    """The main table of ``/proc/net/fib_trie`` for a host with loopback and ``address`` on a /16."""
    net = ".".join(address.split(".")[:2])
    return ("Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n"
            f"     +-- {net}.0.0/16 2 0 2\n        |-- {net}.0.0\n           /16 link UNICAST\n"
            f"        |-- {address}\n           /32 host LOCAL\n        |-- {net}.255.255\n           /32 link BROADCAST\n"
            "     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n"
            "              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n"
            "        |-- 127.255.255.255\n           /32 link BROADCAST\n").encode()


def write(w: TreeWriter, topo: Topology, node: SimNode, node_index: int, s: State, first: bool) -> None:
    proc = node.procfs
    if first:
        w.put(os.path.join(proc, "self", "mounts"), mounts())
        w.put(os.path.join(proc, "self", "mountinfo"), mountinfo())
        w.put(os.path.join(proc, "net", "fib_trie"), fib_trie(topo.address(node_index)))
    w.put(os.path.join(proc, "fs", "lustre", "llite", llite_dir(topo, node_index), "stats"),
          lustre_stats(s, node_index, s.timestamp))
    w.put(os.path.join(proc, "self", "mountstats"), mountstats(s, node_index, int(86400 + s.t)))
    w.put(os.path.join(proc, "diskstats"), diskstats(s, node_index))
