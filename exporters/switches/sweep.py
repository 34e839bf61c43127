"""One sweep of the subnet: ``ibnetdiscover -p`` once, then ``perfquery -l -x -G GUID PORTS`` once per
switch and HCA (all its linked ports in one run, as treydock/infiniband_exporter does), a bounded pool of
them at a time, each within the per-node deadline. A node that fails or hangs costs its own counters
and nothing else.

With ``sweep_hcas`` off only switches are queried: every host link is still read, at its leaf's end (the
HCA's own side comes from the node agents), at one perfquery per switch instead of one per HCA as well."""
from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping

from lockstep.exporters.fabric.ibdiag import (
    DiscoveredPort,
    Fabric,
    IbDiagError,
    PortCounters,
    no_infiniband,
    parse_ibnetdiscover,
    parse_perfquery,
)
from lockstep.exporters.switches import tools
from lockstep.exporters.switches.config import FabricConfig

Runner = Callable[[tuple[str, ...], float], tools.ToolResult]


@dataclass(frozen=True)
class NodeResult:
    guid: str
    kind: str
    name: str
    duration_s: float
    counters: Mapping[int, PortCounters]   # by port number
    failure: str | None = None              # timeout | failed | unreadable
    error: str = ""

    @property
    def up(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class Sweep:
    fabric: Fabric
    nodes: Mapping[str, NodeResult]
    ended: float        # unix time
    duration_s: float
    ports: tuple[DiscoveredPort, ...] = field(default=())   # each (guid, port) once, as its own side lists it


class DiscoveryFailed(Exception):
    def __init__(self, message: str, no_infiniband: bool) -> None:
        super().__init__(message)
        self.no_infiniband = no_infiniband


def _unique_ports(fabric: Fabric) -> tuple[DiscoveredPort, ...]:
    seen: dict[tuple[str, int], DiscoveredPort] = {}
    for port in fabric.ports:
        seen.setdefault((port.local.guid, port.local.port), port)
    return tuple(seen.values())


def _query(config: FabricConfig, run: Runner, guid: str, kind: str, name: str, ports: list[int]) -> NodeResult:
    argv = (*config.perfquery, "-l", "-x", "-G", guid, ",".join(str(p) for p in sorted(ports)))
    try:
        result = run(argv, config.node_timeout_s)
    except Exception as exc:   # this node's query alone is lost, not the sweep of every other node
        result = tools.ToolResult(argv, None, "", "", 0.0, start_error=f"{type(exc).__name__}: {exc}")
    try:
        blocks = parse_perfquery(result.stdout) if not result.timed_out else ()
    except IbDiagError:
        blocks = ()
    counters = {b.port: b for b in blocks if b.port in ports}
    failure = None
    if result.timed_out:
        failure = "timeout"
    elif not result.ok:
        failure = "failed"
    elif not counters:
        failure = "unreadable"
    error = "" if failure is None else (result.describe() if failure != "unreadable" else "no counters in its output")
    return NodeResult(guid, kind, name, result.duration_s, counters, failure, error)


def sweep(config: FabricConfig, run: Runner = tools.run) -> Sweep:
    """Discover, then read every linked port; raises ``DiscoveryFailed`` when discovery does not work."""
    started = time.monotonic()
    found = run((*config.ibnetdiscover, "-p"), config.discover_timeout_s)
    if not found.ok:
        raise DiscoveryFailed(found.describe(), no_infiniband(found.stdout + found.stderr))
    try:
        fabric = parse_ibnetdiscover(found.stdout)
    except IbDiagError as exc:
        raise DiscoveryFailed(f"ibnetdiscover output unreadable: {exc}", False) from None
    ports = _unique_ports(fabric)
    linked: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for port in ports:
        if port.remote is not None and (config.sweep_hcas or port.local.kind == "switch"):
            linked[(port.local.guid, port.local.kind, port.local.name)].append(port.local.port)
    with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="perfquery") as pool:
        futures = [pool.submit(_query, config, run, guid, kind, name, nums) for (guid, kind, name), nums in linked.items()]
        nodes = {f.result().guid: f.result() for f in futures}
    return Sweep(fabric, nodes, time.time(), time.monotonic() - started, ports)
