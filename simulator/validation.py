"""Validation results for the simulated nodes (a scenario's ``validation:`` block), stored as `lockstep validate`
stores them, in the cluster's shared results directory (``DIR/validation``, exporters/catalog/simlayout.py).

Each round (t = 0, every_s, 2 every_s, ...) every node runs ``all_reduce_perf`` across two nodes (node00 with
node01, node02 with node03, ...; an odd last node pairs with node00) over its rails, and a loopback
``ib_write_bw`` on each HCA. A ring is as fast as its slowest link: a ``link_degraded`` fault lowers the pair's
all-reduce bus bandwidth and that HCA's loopback bandwidth by its rate factor. ``history_runs`` daily rounds
before the start, at nominal figures, give the own-history baselines. The job model does not slow down on a
degraded link: its effect is on the validation figures only.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from lockstep.simulator import hardware as hw
from lockstep.simulator.scenario import Scenario
from lockstep.simulator.topology import Topology
from lockstep.validation.model import Check, Figure
from lockstep.validation.result import Result
from lockstep.validation.store import Store

DAY = 86400.0
RUN_S = 60.0                # how long a simulated run takes
MESSAGE = 8 << 20           # ib_write_bw message size
# A two-node all-reduce over every rail, at the efficiency the job model uses; an NDR port's ib_write_bw.
ALLREDUCE_BUSBW = hw.ALLREDUCE_LINK_EFFICIENCY * hw.LINK_RATE_BPS
IB_WRITE_BW = 0.96 * hw.LINK_RATE_BPS


def link_factors(scenario: Scenario, topo: Topology, t: float) -> np.ndarray:
    """Per rail port (flat GPU index): the data rate against nominal at simulated time ``t``."""
    factors = np.ones(topo.n_gpus)
    for f in scenario.faults:
        if f.kind == "link_degraded" and f.start_s <= t < f.end_s:
            g = topo.flat(f.node, f.nic)
            factors[g] = min(factors[g], f.rate_factor)
    return factors


def pairs(nodes: tuple[str, ...]) -> list[tuple[str, str]]:
    out = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    return out + [(nodes[-1], nodes[0])] if len(nodes) % 2 and len(nodes) > 1 else out


def round_results(scenario: Scenario, topo: Topology, t: float, started: float, k: int) -> list[Result]:
    rng = np.random.default_rng([scenario.seed, 0x7A11D, k])
    factors = link_factors(scenario, topo, t).reshape(len(topo.nodes), topo.gpus_per_node)
    index = {node: i for i, node in enumerate(topo.nodes)}
    results = []
    for a, b in pairs(topo.nodes):
        slowest = min(factors[index[a]].min(), factors[index[b]].min())
        busbw = ALLREDUCE_BUSBW * topo.gpus_per_node * slowest * rng.uniform(0.99, 1.01)
        results.append(Result("nccl", "all_reduce_perf", (a, b), "pass", started, RUN_S, (
            Figure("avg_busbw", "bytes_per_second", busbw), Figure("peak_busbw", "bytes_per_second", busbw * 1.3),
            Figure("out_of_bounds", "errors", 0.0)), (Check("data", "pass", "", "0 out-of-bounds values"),)))
    for n, node in enumerate(topo.nodes):
        for g in range(topo.gpus_per_node):
            bw = IB_WRITE_BW * factors[n, g] * rng.uniform(0.995, 1.005)
            results.append(Result("perftest", f"ib_write_bw/{topo.hca(g)}", (node,), "pass", started, RUN_S, (
                Figure("bw_peak", "bytes_per_second", bw * 1.001), Figure("bw_average", "bytes_per_second", bw),
                Figure("msg_rate", "per_second", bw / MESSAGE))))
    return results


class ValidationWriter:
    """Writes a round whenever simulated time reaches the next ``every_s``; the history first."""

    def __init__(self, scenario: Scenario, topo: Topology, store: Store) -> None:
        self.scenario, self.topo, self.store = scenario, topo, store
        self.every_s = scenario.validation.every_s if scenario.validation else None
        self.next_t, self.round = 0.0, 0

    def history(self, start: float) -> None:
        healthy = replace(self.scenario, faults=())
        runs = self.scenario.validation.history_runs if self.scenario.validation else 0
        for day in range(runs, 0, -1):
            self._write(round_results(healthy, self.topo, 0.0, start - day * DAY, 10_000 + day))

    def tick(self, t: float, timestamp: float) -> None:
        if self.every_s is None or t < self.next_t:
            return
        self._write(round_results(self.scenario, self.topo, t, timestamp, self.round))
        self.round += 1
        self.next_t = self.round * self.every_s

    def _write(self, results: list[Result]) -> None:
        for result in results:
            self.store.write(result)
