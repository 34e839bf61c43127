"""``DIR/<node>/sys/fs/cgroup/system.slice/slurmstepd.scope/job_<id>/{io.stat,io.pressure}``: the job's cgroup v2
group on each of its nodes as Slurm's cgroup/v2 plugin lays it out, or, where the simulator presents the job as
pods, ``kubepods.slice/kubepods-pod<uid>.slice/`` of the node's pod (a Guaranteed pod under the kubelet's
systemd driver, its UID's dashes written as underscores; the layouts ``lockstep.exporters.storage.jobcgroups``
reads; the files' form as tests/fixtures/cgroup holds them), read by
the ``job-io`` collector. io.stat holds the job's cache device (``hardware.CACHE_DEVICE``); network file
systems (Lustre, NFS) do no block I/O in the job's group and are not in it, as on a real node. io.pressure's
totals are microseconds; its averages are the last interval's share, in percent. The values are those of
``signals.JOB_IO``."""
from __future__ import annotations

import os

from lockstep.exporters.catalog.simlayout import SimNode
from lockstep.simulator import hardware as hw
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology
from lockstep.simulator.tree.files import TreeWriter


def group(node: SimNode, job_id: str) -> str:
    return os.path.join(node.sysfs, "fs", "cgroup", "system.slice", "slurmstepd.scope", f"job_{job_id}")


def pod_group(node: SimNode, uid: str) -> str:
    return os.path.join(node.sysfs, "fs", "cgroup", "kubepods.slice", f"kubepods-pod{uid.replace('-', '_')}.slice")


def io_stat(s: State, n: int) -> bytes:
    def st(k):
        return int(s.storage[k][n])
    return (f"{hw.CACHE_DEVICE} rbytes={st('job_io_rbytes')} wbytes={st('job_io_wbytes')} rios={st('job_io_rios')} "
            f"wios={st('job_io_wios')} dbytes=0 dios=0\n").encode()


def io_pressure(s: State, n: int, before: tuple[int, int], period: float) -> bytes:
    lines = []
    for kind, total, last in (("some", int(s.storage["job_io_some_us"][n]), before[0]),
                              ("full", int(s.storage["job_io_full_us"][n]), before[1])):
        avg = 100.0 * (total - last) / (period * 1e6)
        lines.append(f"{kind} avg10={avg:.2f} avg60={avg:.2f} avg300={avg:.2f} total={total}")
    return ("\n".join(lines) + "\n").encode()


class CgroupWriter:
    """Writes each job node's group every tick: the Slurm job's (its id is a number: another id has no group),
    or, given the pods of the job (``SimPod``: ``node``, ``uid``), the node's pod's."""

    def __init__(self, topo: Topology, job_id: str) -> None:
        self.topo, self.job_id = topo, job_id
        self.before: dict[int, tuple[int, int]] = {}

    def write(self, w: TreeWriter, node: SimNode, n: int, s: State, pods: list | None = None) -> None:
        if not self.topo.job_nodes[n]:
            return
        if pods is None:
            if not self.job_id.isdigit():
                return
            path = group(node, self.job_id)
        else:
            held = [pod for pod in pods if pod.node == node.name]
            if not held:
                return      # the member is gone (its pod deleted)
            path = pod_group(node, held[0].uid)
        w.put(os.path.join(path, "io.stat"), io_stat(s, n))
        now = (int(s.storage["job_io_some_us"][n]), int(s.storage["job_io_full_us"][n]))
        w.put(os.path.join(path, "io.pressure"),
              io_pressure(s, n, self.before.get(n, now), self.topo.scenario.sample_period_s))
        self.before[n] = now
