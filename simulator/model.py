"""The pure model: the cluster's state at tick k from the seed and the scenario alone.

``Model.states()`` yields one ``State`` per sample (t = 0, P, 2P, ...). Gauges describe the interval
(t - P, t]; counters are integers (in the units the real source reports) accumulated from seeded
per-tick increments, so the live writer and the series writer see bit-identical numbers.
The yielded ``State`` is updated in place on the next tick: copy what you keep.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from lockstep.simulator import hardware as hw
from lockstep.simulator import signals
from lockstep.simulator.counters import apply as apply_counters
from lockstep.simulator.faults import Conditions, conditions, fault_xid
from lockstep.simulator.job import JobTick, job_tick
from lockstep.simulator.observe import gpu_gauges, port_increments, storage_increments
from lockstep.simulator.scenario import Scenario
from lockstep.simulator.state import State
from lockstep.simulator.topology import Topology


class Model:
    def __init__(self, scenario: Scenario, start_timestamp: float | None = None,
                 counters: dict | None = None) -> None:
        """``counters``: where another run's ended (``lockstep.simulator.counters``), instead of the seeded start."""
        self.scenario = scenario
        self.topo = Topology(scenario)
        self.start = scenario.start_timestamp if start_timestamp is None else start_timestamp
        self.counters = counters

    def states(self, ticks: int | None = None) -> Iterator[State]:
        """States for k = 0 .. ticks-1 (forever when ticks is None: faults end, checkpoints go on)."""
        state = self._initial()
        if self.counters:
            apply_counters(state, self.counters)
        k = 0
        while ticks is None or k < ticks:
            self._advance(state, k)
            yield state
            k += 1

    def _initial(self) -> State:
        topo, n = self.topo, self.topo.n_gpus
        rng = np.random.default_rng([self.scenario.seed, 0xBA5E])
        nn, nr, npri = len(topo.nodes), len(topo.racks), len(topo.pfc_priorities)
        words = rng.integers(10**9, 10**11, size=(2, n))
        port = {name: np.zeros(n, np.int64) for name in PORT_COUNTERS}
        port["port_xmit_data"][:], port["port_rcv_data"][:] = words
        port["port_xmit_packets"][:] = port["unicast_xmit_packets"][:] = words[0] * 4 // hw.MTU
        port["port_rcv_packets"][:] = port["unicast_rcv_packets"][:] = words[1] * 4 // hw.MTU
        storage = {name: np.zeros(nn, np.int64) for name in STORAGE_COUNTERS}
        storage["nvme_reads"][:] = rng.integers(10**5, 10**6, nn)
        storage["nvme_read_sectors"][:] = storage["nvme_reads"] * 256
        return State(
            k=0, t=0.0, timestamp=self.start, gpu={}, energy_mj=rng.integers(10**9, 5 * 10**9, n),
            lost=np.zeros(n, bool), xid_events=[], port=port, port_down=np.zeros(n, bool),
            memory={key: np.zeros(n, np.int64) for key in MEMORY_KEYS}, missing=np.zeros(n, bool),
            pfc={name: np.zeros((n, npri), np.int64) for name in PFC_COUNTERS},
            storm={"warning": np.zeros(n, np.int64), "error": np.zeros(n, np.int64), "seconds": np.zeros(n)},
            storage=storage,
            power={"chassis_w": np.zeros(nn), "chassis_j": rng.uniform(3.6e9, 1.8e10, nn),
                   "pdu_w": np.zeros(nr), "pdu_j": rng.uniform(3.6e10, 1.8e11, nr)},
            coolant={}, rank_busy_s=np.zeros(int(topo.job_gpus.sum())), steps=0.0)

    def _advance(self, s: State, k: int) -> None:
        topo, period = self.topo, self.scenario.sample_period_s
        rng = np.random.default_rng([self.scenario.seed, k])
        s.k, s.t = k, k * period
        s.timestamp = self.start + s.t
        c = conditions(topo, s.t)
        noisy = topo.draws.tick_rng(k)          # its own stream: noise: none keeps the exact numbers
        j = job_tick(topo, c, noisy)
        self._xids(s)
        s.gpu = gpu_gauges(topo, c, j, rng, noisy)
        if k > 0:  # counters start at their baseline; each later tick adds its interval
            s.energy_mj += (s.gpu["power_mw"] * period).astype(np.int64)
            for name, inc in port_increments(topo, c, j, rng).items():
                (s.port if name in s.port else s.pfc)[name] += inc
            self._storms(s, c)
            for name, inc in storage_increments(topo, c, j, rng).items():
                s.storage[name] += inc
            s.steps += j.steps
            for cause, v in j.lost.items():
                s.lost_gpu_s[cause] += v
            s.imbalance_gpu_s += j.imbalance
            for kind, causes in j.ledger.items():
                for cause, v in causes.items():
                    s.ledger[kind][cause] += v
        # what the job's RAS answers, polled between ticks, read its steps from (simulator/collectives.py)
        s.step_history = [*s.step_history[-(math.ceil(hw.RAS_POLL_S / period) + 1):], (s.t, s.steps)]
        s.port_down[:] = c.port_down
        s.rank_busy_s[:] = j.rank_busy_s
        s.comm_s = j.comm_s
        self._inspector_dump(s, j)
        self._power(s, j, period if k > 0 else 0.0, rng)

    def _inspector_dump(self, s: State, j: JobTick) -> None:
        """What NCCL Inspector's 2.30 dump averages: each rank's wait in the all-reduce over the steps of the
        interval (``INSPECTOR_INTERVAL_S``); an interval without a step is not dumped (its file ages)."""
        if s.wait_sum is None:
            s.wait_sum, s.dump_wait_s = np.zeros_like(s.rank_busy_s), np.full_like(s.rank_busy_s, np.nan)
        if j.steps > 0 and j.wait_s is not None:
            s.wait_sum += j.wait_s
            s.wait_ticks += 1
        if math.floor(s.t / hw.INSPECTOR_INTERVAL_S) > s.dumps:
            s.dumps = math.floor(s.t / hw.INSPECTOR_INTERVAL_S)
            if s.wait_ticks:
                s.dump_wait_s, s.dump_comm_s = s.wait_sum / s.wait_ticks, s.comm_s
            s.wait_sum, s.wait_ticks = np.zeros_like(s.rank_busy_s), 0

    def _xids(self, s: State) -> None:
        """Instant GPU faults of the interval (their XID, lost GPU, memory error counts) and the GPUs
        missing at ``t``."""
        lo = s.t - self.scenario.sample_period_s
        s.missing[:] = False
        for f in self.scenario.faults:
            if f.kind == "gpu_missing":
                s.missing[self.topo.flat(f.node, f.gpu)] |= f.start_s <= s.t < f.end_s
            code = fault_xid(f)
            if code is None or not lo < f.start_s <= s.t:
                continue
            g = self.topo.flat(f.node, f.gpu)
            s.xid_events.append((len(s.xid_events) + 1, g, code, self.start + f.start_s))
            s.lost[g] |= code == 79
            if f.kind == "ecc_error":
                s.memory["ecc_uncorrected"][g] += f.count
            elif f.kind == "row_remap":
                s.memory["remap_uncorrectable"][g] += 1
                s.memory[f"remap_{f.outcome}"][g] = 1

    def _storms(self, s: State, c: Conditions) -> None:
        """mlx5 pause-storm watchdog: a warning per 2 s of continuous pausing, an error per 30 s."""
        before = s.storm["seconds"].copy()
        s.storm["seconds"] += c.storm_s
        s.storm["warning"] += (np.floor(s.storm["seconds"] / 2) - np.floor(before / 2)).astype(np.int64)
        s.storm["error"] += (np.floor(s.storm["seconds"] / 30) - np.floor(before / 30)).astype(np.int64)

    def _power(self, s: State, j: JobTick, dt: float, rng: np.random.Generator) -> None:
        topo = self.topo
        gpu_w = (s.gpu["power_mw"] / 1000.0).reshape(len(topo.nodes), topo.gpus_per_node).sum(axis=1)
        active = np.zeros(len(topo.nodes))
        active[topo.job_nodes] = 1.0 - j.ckpt - float(j.spin.mean()) * 0.5
        base = hw.NODE_BASE_IDLE_W + (hw.NODE_BASE_BUSY_W - hw.NODE_BASE_IDLE_W) * active
        s.power["chassis_w"] = np.round(gpu_w + base + rng.normal(0, 15, len(topo.nodes)), 1)
        pdu = np.bincount(topo.node_rack, s.power["chassis_w"], len(topo.racks)) + hw.RACK_OVERHEAD_W
        s.power["pdu_w"] = np.round(pdu, 1)
        s.power["chassis_j"] += s.power["chassis_w"] * dt
        s.power["pdu_j"] += s.power["pdu_w"] * dt
        heat = float(s.power["chassis_w"].sum()) * hw.LIQUID_CAPTURE
        flow = hw.COOLANT_FLOW_LPM_PER_NODE * len(topo.nodes)
        supply = hw.COOLANT_SUPPLY_C + float(rng.normal(0, 0.05))
        rise = heat / (flow / 60.0 * 1.03 * hw.COOLANT_CP)  # kg/s = L/min / 60 * density
        s.coolant = {"supply_c": round(supply, 2), "return_c": round(supply + rise, 2),
                     "flow_lpm": round(flow, 1), "heat_w": round(heat, 1)}


MEMORY_KEYS = ("ecc_uncorrected", "remap_uncorrectable", "remap_pending", "remap_failed")
# The counters of the state: every one the table of simulator/signals.py names.
PORT_COUNTERS = tuple(signal.key for signal in signals.PORT)
PFC_COUNTERS = tuple(signal.key for signal in signals.PFC)
STORAGE_COUNTERS = tuple(signal.key for signal in signals.STORAGE)
