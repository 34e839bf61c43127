"""GPU → pod → training job on one node: the kubelet's device assignments joined with the pod cache.

The kubelet is the authority on which container holds which GPU; the pod cache (the API server's view)
only names the job. A pod the kubelet lists that the cache doesn't know yet (its watch event is still on
the way) is left out of this scrape rather than filed under a wrong job; a GPU no container holds has no
row. ``KubernetesSource`` asks the kubelet on each scrape and reads the watcher's cache.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from lockstep.exporters.gpu.mig import DeviceRef
from lockstep.exporters.jobs.devices import resolve
from lockstep.exporters.jobs.rows import JobRow
from lockstep.exporters.kube.identity import PodMeta, job_identity
from lockstep.exporters.kube.podresources import ContainerGpus, PodResourcesClient
from lockstep.exporters.kube.podwatch import PodWatcher

log = logging.getLogger("lockstep.kube")


class ApiServerUnavailable(RuntimeError):
    """The pod cache has never been filled: no job can be named."""


@dataclass(frozen=True)
class Rules:
    job_labels: Sequence[str]
    rank_labels: Sequence[str]


def join(containers: Iterable[ContainerGpus], pods: Mapping[tuple[str, str], PodMeta],
         refs: Mapping[str, DeviceRef], rules: Rules) -> tuple[list[JobRow], list[str]]:
    """(rows, ``namespace/pod`` of the pods the cache doesn't know); one row per GPU device a container holds."""
    rows, unknown, seen = [], [], set()
    for c in containers:
        pod = pods.get((c.namespace, c.pod))
        if pod is None:
            unknown.append(f"{c.namespace}/{c.pod}")
            continue
        identity = job_identity(pod, rules.job_labels, rules.rank_labels)
        for device_id in c.device_ids:
            ref = resolve(device_id, refs)
            row = JobRow(ref.gpu, ref.uuid, identity.job_id, "", identity.rank, c.pod, c.namespace, c.container)
            if row not in seen:     # time-sliced replicas of one GPU in one container: one row
                seen.add(row)
                rows.append(row)
    return rows, unknown


class KubernetesSource:
    """Rows for the jobs collector: raises when nothing can be said, returns the current error with rows
    from the cached pod metadata while the API server is away after a successful sync."""

    def __init__(self, kubelet: PodResourcesClient, watcher: PodWatcher,
                 refs: Callable[[], Mapping[str, DeviceRef]], rules: Rules) -> None:
        self.kubelet, self.watcher, self.refs, self.rules = kubelet, watcher, refs, rules

    def rows(self) -> tuple[list[JobRow], str | None]:
        containers = self.kubelet.list()          # raises KubeletUnavailable
        snapshot = self.watcher.snapshot()
        if not snapshot.synced:
            raise ApiServerUnavailable(f"pods of node {self.watcher.node} not listed yet from "
                                       f"{self.watcher.server.url}: {snapshot.error or 'first list pending'}")
        rows, unknown = join(containers, snapshot.pods, self.refs() if containers else {}, self.rules)
        if unknown:
            log.debug("pods not in the pod cache yet", extra={"fields": {"pods": ",".join(unknown)}})
        return rows, snapshot.error

    def pod_jobs(self) -> dict[str, str]:
        """``{pod UID: job id}`` of the pods holding this node's GPUs (raises as ``rows`` does)."""
        rows, _ = self.rows()
        pods = self.watcher.snapshot().pods
        out = {}
        for row in rows:
            pod = pods.get((row.namespace, row.pod))
            if pod is not None and pod.uid:
                out[pod.uid.lower()] = row.job_id
        return out

    def close(self) -> None:
        self.watcher.close()
        self.kubelet.close()
