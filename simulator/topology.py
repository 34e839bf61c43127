"""The simulated cluster's static facts: nodes, racks, GPUs, rails (HCA + netdev per GPU), devices.

Everything here derives from the scenario and its seed, so both writers (files, frame) agree on
names, UUIDs and serials.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from lockstep.simulator.noise import Draws
from lockstep.simulator.scenario import Fault, Scenario

# PCI bus numbers of the eight GPUs and their rail HCAs on an HGX H100 board (one NIC per GPU).
GPU_BUS = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
NIC_BUS = (0x19, 0x29, 0x3B, 0x5C, 0x9B, 0xAA, 0xBB, 0xDA)
BASE_PRIORITY = 3  # the RoCE lossless class; PFC is enabled on it on every NIC


@dataclass(frozen=True)
class Topology:
    scenario: Scenario

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        return self.scenario.node_names

    @property
    def gpus_per_node(self) -> int:
        return self.scenario.cluster.gpus_per_node

    @property
    def n_gpus(self) -> int:
        return len(self.nodes) * self.gpus_per_node

    @cached_property
    def gpu_node(self) -> np.ndarray:
        """Node index of every GPU (GPU-major arrays are node-major: node0 gpu0..G-1, node1 ...)."""
        return np.repeat(np.arange(len(self.nodes)), self.gpus_per_node)

    @cached_property
    def gpu_index(self) -> np.ndarray:
        return np.tile(np.arange(self.gpus_per_node), len(self.nodes))

    def flat(self, node: str, gpu: int) -> int:
        return self.nodes.index(node) * self.gpus_per_node + gpu

    @cached_property
    def job_nodes(self) -> np.ndarray:
        """Boolean per node: part of the job."""
        members = set(self.scenario.job.nodes)
        return np.array([n in members for n in self.nodes])

    @cached_property
    def job_gpus(self) -> np.ndarray:
        return self.job_nodes[self.gpu_node]

    @cached_property
    def draws(self) -> Draws:
        """The scenario's static noise (speeds, jitter level, clock offsets), drawn from its seed."""
        sc = self.scenario
        return Draws(sc.noise, sc.seed, self.n_gpus, self.gpus_per_node, self.job_gpus)

    @cached_property
    def faults(self) -> tuple[Fault, ...]:
        """The scenario's faults and the transient slow ranks its noise adds (seeded)."""
        return self.scenario.faults + self.draws.transients(self.scenario, self.nodes, Fault)

    @cached_property
    def rack_slot(self) -> np.ndarray:
        """Per node, its height in its rack (0 bottom … 1 top)."""
        per = self.scenario.cluster.nodes_per_rack
        return (np.arange(len(self.nodes)) % per) / max(per - 1, 1)

    def rack_of(self, node_index: int) -> str:
        return f"r{node_index // self.scenario.cluster.nodes_per_rack + 1}"

    @cached_property
    def racks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.rack_of(i) for i in range(len(self.nodes))))

    @cached_property
    def node_rack(self) -> np.ndarray:
        return np.array([self.racks.index(self.rack_of(i)) for i in range(len(self.nodes))])

    @staticmethod
    def pdu_name(rack: str) -> str:
        return f"{rack}-pdu"

    cdu_name = "cdu1"

    @staticmethod
    def address(node_index: int) -> str:
        """The node's address on the job's bootstrap network: what NCCL's RAS names it by."""
        return f"10.10.{node_index // 250}.{node_index % 250 + 1}"

    @staticmethod
    def hca(gpu: int) -> str:
        return f"mlx5_{gpu}"

    def iface(self, gpu: int) -> str:
        return f"ens{NIC_BUS[gpu % 8] + 100 * (gpu // 8)}np0"

    @cached_property
    def pfc_priorities(self) -> tuple[int, ...]:
        """Priorities with PFC enabled (mlx5 shows per-priority pause counters only for these)."""
        extra = {f.priority for f in self.scenario.faults if f.kind == "pause_storm"}
        return tuple(sorted({BASE_PRIORITY} | extra))

    @cached_property
    def identity(self) -> dict[str, np.ndarray]:
        """Seeded per-GPU identity: UUID hex, board serial."""
        rng = np.random.default_rng([self.scenario.seed, 0xC0FFEE])
        raw = rng.integers(0, 2**63, size=(self.n_gpus, 2), dtype=np.int64)
        serial = rng.integers(10**12, 10**13, size=self.n_gpus, dtype=np.int64)
        return {"uuid": np.array([_uuid(int(a), int(b)) for a, b in raw]), "serial": serial.astype(str)}

    def pci_bus_id(self, gpu: int) -> str:
        return f"00000000:{GPU_BUS[gpu % 8] + 0x100 * (gpu // 8):02X}:00.0"


def _uuid(a: int, b: int) -> str:
    h = f"{a:016x}{b:016x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
