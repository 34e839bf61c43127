"""Where `lockstep sim run --root DIR` puts each source the node agent reads (simulator/FORMATS.md).

A file-format contract, like the metric names: the simulator's writers build every path from it,
and ``lockstep exporter --sim.node-root DIR/<node>`` expands into the collectors' own flags with
it (``exporters.cli``). It lives in the catalog because both sides may import it: the simulator
depends on nothing but the catalog, and the exporters never import the simulator. Below ``sys``,
``proc`` and ``ethtool`` the layout is the kernel's and the drivers' own, known to their readers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SimNode:
    """``DIR/<node>``: one simulated node's sources."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def sysfs(self) -> Path:
        return self.root / "sys"

    @property
    def procfs(self) -> Path:
        return self.root / "proc"

    @property
    def ethtool(self) -> Path:
        """``<iface>/statistics`` (``ethtool -S`` text) and ``<iface>/driver`` of every NIC."""
        return self.root / "ethtool"

    @property
    def gpus(self) -> Path:
        """The NVML-shaped GPU state (``gpus.json``)."""
        return self.root / "gpus.json"

    @property
    def job_mapping(self) -> Path:
        """``<gpu index>``: the job holding the GPU, as the Slurm prolog in deploy/slurm/ writes it."""
        return self.root / "gpu-jobs"

    @property
    def job_users(self) -> Path:
        """``<job id>``: the job's user; the prolog's (and the jobs collector's) ``<mapping dir>-users``."""
        return self.root / f"{self.job_mapping.name}-users"


@dataclass(frozen=True)
class SimCluster:
    """``DIR``: what ``lockstep sim run --root DIR`` writes."""

    root: Path

    def node(self, name: str) -> SimNode:
        return SimNode(self.root / name)

    @property
    def cluster_doc(self) -> Path:
        """Nodes, racks, job, Redfish URL and start time; written last, once the first tick is."""
        return self.root / "cluster.json"

    @property
    def power_config(self) -> Path:
        """The power exporter's config for the simulated BMCs, PDUs and CDU."""
        return self.root / "power-exporter.yaml"
