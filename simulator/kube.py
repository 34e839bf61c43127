"""``lockstep sim run --scheduler kubernetes``: the scenario's job presented the Kubernetes way.

The job runs as a JobSet (the shape of a Kubeflow Trainer v2 TrainJob: one replicated job ``node``, an
Indexed Job whose completion index is the node's rank; labels as tests/fixtures/kubernetes/README.md
cites them), one pod per job node holding every GPU of its node. Each node gets a kubelet PodResources
socket at ``DIR/<node>/kubelet.sock``, the cluster one API server answering pod list/watch, and
``DIR/kubeconfig`` points the node agents at it with their token. A ``member_lost`` fault deletes the
node's pod while it lasts (the operator recreates it when it ends).
"""
from __future__ import annotations

import hashlib

import yaml
from aiohttp import web

from lockstep.exporters.catalog.simlayout import SimCluster
from lockstep.simulator.faults import members_gone
from lockstep.simulator.kubeapi import Faults, PodStore, create_app
from lockstep.simulator.kubelet import Kubelet
from lockstep.simulator.kubepods import SimContainer, SimPod
from lockstep.simulator.topology import Topology

TOKEN = "lockstep-node-agent"   # the node agents' service-account token, as the API server knows it
DEFAULT_NAMESPACE = "default"


def job_pods(topo: Topology, t: float) -> list[SimPod]:
    """The job's pods at simulated time ``t``: one per job node, but the members gone then."""
    namespace, _, name = topo.scenario.job.job_id.rpartition("/")
    namespace, name = namespace or DEFAULT_NAMESPACE, name.lower()
    child = f"{name}-node-0"     # the JobSet's Job of replicated job "node", index 0
    gone = members_gone(topo, t)
    pods = []
    for rank, node in enumerate(n for i, n in enumerate(topo.nodes) if topo.job_nodes[i]):
        if node in gone:
            continue
        labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                  "jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/restart-attempt": "0",
                  "batch.kubernetes.io/job-name": child, "job-name": child,
                  "batch.kubernetes.io/job-completion-index": str(rank)}
        index = topo.nodes.index(node)
        uuids = tuple(str(topo.identity["uuid"][index * topo.gpus_per_node + g]) for g in range(topo.gpus_per_node))
        suffix = hashlib.sha256(f"{namespace}/{name}/{rank}".encode()).hexdigest()[:5]
        pods.append(SimPod(namespace, f"{child}-{rank}-{suffix}", node, (SimContainer("node", uuids),), labels,
                           {"batch.kubernetes.io/job-completion-index": str(rank)}, ("batch/v1", "Job", child)))
    return pods


class KubeNodes:
    """The kubelets and the API server of a live run; ``update`` moves them to a tick's time."""

    def __init__(self, topo: Topology, cluster: SimCluster) -> None:
        self.topo, self.cluster = topo, cluster
        self.store = PodStore()
        self.pods: list[SimPod] = []
        self.kubelets = [Kubelet(cluster.node(node).kubelet_socket, self._pods_of(node)) for node in topo.nodes]
        self.runner: web.AppRunner | None = None
        self.url = ""

    def _pods_of(self, node: str):
        return lambda: [p for p in self.pods if p.node == node]

    def update(self, t: float) -> None:
        self.pods = job_pods(self.topo, t)
        self.store.replace(self.pods)

    async def start(self, host: str, t: float) -> str:
        """Serve the API server on an ephemeral port and every node's kubelet; write the kubeconfig."""
        self.update(t)
        self.runner = web.AppRunner(create_app(self.store, [TOKEN], Faults(bookmark_s=30.0)), access_log=None,
                                    shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, host, 0).start()
        self.url = f"http://{host}:{self.runner.addresses[0][1]}"
        for kubelet in self.kubelets:
            kubelet.start()
        self.cluster.kubeconfig.write_text(yaml.safe_dump(kubeconfig(self.url), sort_keys=False))
        return self.url

    async def stop(self) -> None:
        for kubelet in self.kubelets:
            kubelet.stop()
        if self.runner is not None:
            await self.runner.cleanup()


def kubeconfig(url: str) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": url}}],
            "users": [{"name": "lockstep-node", "user": {"token": TOKEN}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "lockstep-node"}}]}
