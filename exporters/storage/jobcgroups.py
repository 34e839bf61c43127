"""Where a job's processes are in the cgroup v2 tree, and which job a group is.

Slurm (``cgroup/v2`` plugin, slurm.schedmd.com/cgroup_v2.html): ``system.slice/slurmstepd.scope/job_<id>``
(``<nodename>_slurmstepd.scope`` where several slurmd share a host). Kubernetes (the kubelet's pod
cgroups, kubernetes.io/docs/concepts/architecture/cgroups/): with the systemd driver
``kubepods.slice/kubepods-pod<uid>.slice`` for Guaranteed pods and
``kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice`` for the others, the UID's dashes
written as underscores; with the cgroupfs driver ``kubepods/pod<uid>`` and ``kubepods/<qos>/pod<uid>``."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lockstep.exporters.jobs.rows import KUBERNETES, SLURM

# The folders whose children may be job groups, relative to the cgroup v2 mount.
PARENTS = ("system.slice", "kubepods.slice", "kubepods.slice/kubepods-burstable.slice",
           "kubepods.slice/kubepods-besteffort.slice", "kubepods", "kubepods/burstable", "kubepods/besteffort")
SLURM_SCOPE = re.compile(r"^(?:[A-Za-z0-9_.-]+_)?slurmstepd\.scope$")
_SLURM_JOB = re.compile(r"^job_([0-9]+)$")
_POD = re.compile(r"^(?:kubepods(?:-(?:burstable|besteffort))?-)?pod([0-9a-fA-F_-]{32,36})(?:\.slice)?$")


@dataclass(frozen=True, slots=True)
class JobGroup:
    scheduler: str
    key: str        # Slurm: the job id; Kubernetes: the pod UID (dashed)


def slurm_job(name: str) -> JobGroup | None:
    match = _SLURM_JOB.match(name)
    return JobGroup(SLURM, match.group(1)) if match else None


def kube_pod(name: str) -> JobGroup | None:
    match = _POD.match(name)
    return JobGroup(KUBERNETES, match.group(1).replace("_", "-").lower()) if match else None
