"""Where `lockstep sim run --root DIR` puts each source the node agent reads (simulator/FORMATS.md).

A file-format contract, like the metric names: the simulator's writers build every path from it,
and ``lockstep exporter --sim.node-root DIR/<node>`` expands into the collectors' own flags with
it (``lockstep.exporters.cli``). It lives in the catalog because both sides may import it: the simulator
depends on nothing but the catalog, and the exporters never import the simulator. Below ``sys``,
``proc`` and ``ethtool`` the layout is the kernel's and the drivers' own, known to their readers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SimNode:
    """``DIR/<node>``: where one simulated node's sources are."""

    root: Path
    name: str
    sysfs: Path
    procfs: Path
    ethtool: Path       # <iface>/statistics (`ethtool -S` text) and <iface>/driver of every NIC
    gpus: Path          # gpus.json: the NVML-shaped GPU state
    job_mapping: Path   # <gpu index>: the job holding the GPU, as the Slurm prolog in deploy/slurm/ writes it
    job_users: Path     # <job id>: the job's user; the prolog's (and the jobs collector's) <mapping dir>-users
    # `lockstep validate`'s results directory, shared by the cluster's nodes (DIR/validation/<node>/...)
    validation_results: Path
    kubelet_socket: Path   # the node's kubelet PodResources socket, where the simulator presents Kubernetes
    kubeconfig: Path       # DIR/kubeconfig: the simulated API server (pod list/watch) and the agent's token
    nccl_inspector: Path   # NCCL Inspector's Prometheus files of the node's ranks (NCCL_INSPECTOR_DUMP_DIR)
    steps_socket: Path     # the node agent's step-feed socket the simulated ranks send to (catalog/stepfeed.py)
    # one line, HOST:PORT (NCCL_RAS_ADDR's form): where the node's simulated NCCL RAS service listens (job nodes)
    nccl_ras_address: Path

    @classmethod
    def at(cls, root: Path) -> "SimNode":
        jobs = root / "gpu-jobs"
        # A unix socket's path must stay under 108 bytes: the socket sits right in the node's directory.
        return cls(root, root.name, sysfs=root / "sys", procfs=root / "proc", ethtool=root / "ethtool",
                   gpus=root / "gpus.json", job_mapping=jobs, job_users=root / f"{jobs.name}-users",
                   validation_results=root.parent / "validation",
                   kubelet_socket=root / "kubelet.sock", kubeconfig=root.parent / "kubeconfig",
                   nccl_inspector=root / "nccl-inspector", steps_socket=root / "steps.sock",
                   nccl_ras_address=root / "nccl-ras.address")


@dataclass(frozen=True)
class SimCluster:
    """``DIR``: what ``lockstep sim run --root DIR`` writes."""

    root: Path

    def node(self, name: str) -> SimNode:
        return SimNode.at(self.root / name)

    @property
    def cluster_doc(self) -> Path:
        """Nodes, racks, job, Redfish URL and start time; written last, once the first tick is."""
        return self.root / "cluster.json"

    @property
    def validation_results(self) -> Path:
        """Validation results of every node (scenarios with a ``validation:`` block), as on shared storage."""
        return self.root / "validation"

    @property
    def kubeconfig(self) -> Path:
        """With ``--scheduler kubernetes``: the simulated API server's address and the agents' token."""
        return self.root / "kubeconfig"

    @property
    def power_config(self) -> Path:
        """The power exporter's config for the simulated BMCs, PDUs and CDU."""
        return self.root / "power-exporter.yaml"
