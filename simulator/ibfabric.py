"""A simulated InfiniBand fabric behind the simulated nodes: a two-tier, rail-optimised topology (one HCA
per node and rail, each rail's nodes on that rail's leaves, every leaf cabled to every spine) and its
port counters as a pure function of time, with the link faults of a scenario. ``ibtools`` prints it as
``ibnetdiscover -p`` and ``perfquery -x`` do, so the fabric exporter reads it through the real tools'
formats and never knows it is simulated.

Faults (``spec["faults"]``): ``marginal_cable`` {node, hca, start_s, errors_per_s, rising_per_s}: the HCA
port's SymbolErrorCounter rises from ``start_s`` at ``errors_per_s``, a rate that itself grows by
``rising_per_s`` every second (0 unless given: a steady leak; above it a cable getting worse);
``link_flap`` {node, hca, start_s, end_s, flaps}: the
link goes down ``flaps`` times, evenly spread over [start_s, end_s), LinkDownedCounter and
LinkErrorRecoveryCounter moving on both ends. ``unreachable``: switch names whose perfquery never answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

SPEED, WIDTH = "NDR", 4
RATE_BYTES_PER_S = WIDTH * 100e9 / 8        # 4x NDR: 4 lanes of 100 Gb/s
UTILISATION = 0.3                           # the share of the rate every port carries
SWITCH_PORTS = 64                           # a 64-port NDR switch (QM9700): half down, half up on a leaf
MTU_BYTES = 4096                            # the packets PortXmitPkts counts
# What a symbol error costs the job (the marginal cable's model): the corrupted packet is dropped by the
# receiving port and the reliable-connected transport resends from it, go-back-N: everything in flight,
# one round trip of the link's rate (leaf-spine-leaf, about 2 us). The port's wire counters keep counting
# (resent data is sent data); what the job loses is goodput: errors/s x RTT_S / UTILISATION of its traffic.
# The simulated job is not tied to this fabric (its step times come from simulator/faults.py), so this
# model, not a simulated straggler, is what "before the job shows a straggler" is tested against.
RTT_S = 2e-6
SLOWING_LOSS = 0.01   # the least goodput loss taken to show in the job's steps (a straggler needs several %)
_CA_BASE, _LEAF_BASE, _SPINE_BASE = 0xA088C20300000000, 0x0C42A10300001000, 0x0C42A10300002000


@dataclass(frozen=True, slots=True)
class Node:
    kind: str          # switch | ca
    guid: str          # 0x and 16 hex digits
    lid: int
    name: str          # node description


@dataclass(frozen=True, slots=True)
class Link:
    a: Node
    a_port: int
    b: Node
    b_port: int


@dataclass(frozen=True)
class Fabric:
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]

    def ports(self) -> dict[tuple[str, int], tuple[Node, Node, int]]:
        """(guid, port) → (its node, partner node, partner port), both ends of every link."""
        out: dict[tuple[str, int], tuple[Node, Node, int]] = {}
        for link in self.links:
            out[(link.a.guid, link.a_port)] = (link.a, link.b, link.b_port)
            out[(link.b.guid, link.b_port)] = (link.b, link.a, link.a_port)
        return out


def hca_name(node: int, rail: int) -> str:
    """The HCA's node description as rdma-ndd writes it by default: ``<hostname> <device>``."""
    return f"node{node:02d} mlx5_{rail}"


def build(nodes: int = 128, rails: int = 8, spines: int = 16) -> Fabric:
    down = SWITCH_PORTS // 2
    per_rail = -(-nodes // down)
    leaves = [[Node("switch", f"0x{_LEAF_BASE + r * per_rail + i:016x}", 1 + r * per_rail + i, f"ib-leaf-r{r}-{i}")
               for i in range(per_rail)] for r in range(rails)]
    flat = [leaf for rail in leaves for leaf in rail]
    if (SWITCH_PORTS - down) % spines or len(flat) * (SWITCH_PORTS - down) // spines > SWITCH_PORTS:
        raise ValueError(f"{len(flat)} leaves of {SWITCH_PORTS - down} uplinks do not fit {spines} spines")
    spine = [Node("switch", f"0x{_SPINE_BASE + s:016x}", 1 + len(flat) + s, f"ib-spine-{s}") for s in range(spines)]
    lid = 1 + len(flat) + spines
    cas, links = [], []
    for n in range(nodes):
        for r in range(rails):
            ca = Node("ca", f"0x{_CA_BASE + (n << 8) + r:016x}", lid, hca_name(n, r))
            lid += 1
            cas.append(ca)
            links.append(Link(ca, 1, leaves[r][n // down], 1 + n % down))
    per_spine = (SWITCH_PORTS - down) // spines     # links from each leaf to each spine
    for i, leaf in enumerate(flat):
        for s, top in enumerate(spine):
            for j in range(per_spine):
                links.append(Link(leaf, down + 1 + s * per_spine + j, top, 1 + i * per_spine + j))
    return Fabric(tuple(flat + spine + cas), tuple(links))


def error_rate(fault: Mapping[str, Any], t: float) -> float:
    """A marginal cable's symbol errors per second at ``t`` seconds of simulated time."""
    since = t - float(fault["start_s"])
    return 0.0 if since < 0 else float(fault["errors_per_s"]) + float(fault.get("rising_per_s", 0.0)) * since


def symbol_errors(fault: Mapping[str, Any], t: float) -> int:
    """A marginal cable's SymbolErrorCounter at ``t``: the integral of ``error_rate``."""
    since = max(0.0, t - float(fault["start_s"]))
    return int(float(fault["errors_per_s"]) * since + float(fault.get("rising_per_s", 0.0)) * since * since / 2)


def goodput_loss(errors_per_s: float) -> float:
    """The share of a link's traffic the job loses to resends at this symbol-error rate (the model above)."""
    return min(1.0, errors_per_s * RTT_S / UTILISATION)


def slowing_error_rate(loss: float = SLOWING_LOSS) -> float:
    """The symbol-error rate at which the job loses ``loss`` of a link's goodput (1,500/s for 1%)."""
    return loss * UTILISATION / RTT_S


def _flaps(fault: Mapping[str, Any], t: float) -> int:
    count, span = int(fault["flaps"]), float(fault["end_s"]) - float(fault["start_s"])
    return sum(1 for k in range(count) if float(fault["start_s"]) + k * span / count <= t)


def counters(spec: Mapping[str, Any], guid: str, port: int, partner: str, partner_port: int, t: float) -> dict[str, int]:
    """The port's perfquery -x counters at ``t`` seconds of simulated time (data in octets)."""
    data = int(RATE_BYTES_PER_S * UTILISATION * max(t, 0.0)) // 4 * 4
    values = {"PortXmitData": data, "PortRcvData": data, "PortXmitPkts": data // 4096, "PortRcvPkts": data // 4096,
              "SymbolErrorCounter": 0, "LinkErrorRecoveryCounter": 0, "LinkDownedCounter": 0,
              "PortXmitWait": data // 65536}
    ends = {(guid, port), (partner, partner_port)}
    for fault in spec.get("faults", ()):
        where = (_ca_guid(fault), 1)
        if fault["kind"] == "marginal_cable" and where == (guid, port):
            values["SymbolErrorCounter"] += symbol_errors(fault, t)
        elif fault["kind"] == "link_flap" and where in ends:
            flaps = _flaps(fault, t)
            values["LinkDownedCounter"] += flaps
            values["LinkErrorRecoveryCounter"] += flaps
    return values


def _ca_guid(fault: Mapping[str, Any]) -> str:
    node = int(str(fault["node"]).removeprefix("node"))
    return f"0x{_CA_BASE + (node << 8) + int(fault['hca']):016x}"


def from_spec(spec: Mapping[str, Any]) -> Fabric:
    return build(int(spec.get("nodes", 128)), int(spec.get("rails", 8)), int(spec.get("spines", 16)))
