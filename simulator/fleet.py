"""A simulated fleet of several GPU models, sampled as NVML would report it, with GPUs that are slow,
hot or downtrained from the start: what the peer-relative health is evaluated on.

The fleet scenario file (``simulator/scenarios/fleet/*.yaml``)::

    name: fleet-peers
    seed: 11
    duration_s: 172800
    sample_period_s: 60
    models:                       # one block of nodes per model; drivers are dealt out node by node
      - {model: h100-sxm, nodes: 48, gpus_per_node: 8, drivers: ["550.54.15", "535.161.08"]}
    busy: {mean_busy_s: 14400, mean_idle_s: 3600}   # each node alternates jobs and idle gaps
    faults:                       # each from the start: present whenever the GPU is loaded
      - {kind: slow, node: h100-sxm-n03, gpu: 2, clock_factor: 0.4}
      - {kind: hot, node: h100-sxm-n07, gpu: 5, celsius: 18}
      - {kind: downtrained, node: a100-sxm-n02, gpu: 1, width: 8}

The spread is the one a real fleet shows at equal load: silicon (each GPU's power per unit of work
varies by a few per cent, so at the power limit its clock does), cooling (each node's inlet and each
slot's thermal resistance), the job's activity, and sensor noise per sample.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lockstep.exporters.toolkit.configfile import Section, load_yaml, one_of, positive


@dataclass(frozen=True)
class Hardware:
    name: str            # as NVML reports it (lockstep_gpu_info's name)
    max_clock_hz: float
    power_limit_w: float
    idle_w: float
    full_w: float        # draw at full activity and max clock, before the limit
    thermal_c_per_w: float
    pcie_gen: int
    pcie_width: int


HARDWARE = {h.name: h for h in (
    Hardware("NVIDIA H100 80GB HBM3", 1.98e9, 700.0, 75.0, 760.0, 0.055, 5, 16),
    Hardware("NVIDIA A100-SXM4-80GB", 1.41e9, 400.0, 55.0, 430.0, 0.09, 4, 16),
    Hardware("NVIDIA L40S", 2.52e9, 350.0, 35.0, 370.0, 0.12, 4, 16),
)}
MODELS = {"h100-sxm": "NVIDIA H100 80GB HBM3", "a100-sxm": "NVIDIA A100-SXM4-80GB", "l40s": "NVIDIA L40S"}
FAULT_KINDS = ("slow", "hot", "downtrained")

# The spread of healthy GPUs (one standard deviation).
SILICON_SD = 0.03      # power per unit of work
SLOT_THERMAL_SD = 0.04  # thermal resistance of a slot
INLET_SD_C = 1.5       # node inlet
CLOCK_NOISE = 0.005
POWER_NOISE = 0.01
TEMP_NOISE_C = 0.5
BUSY_UTILIZATION = 0.97


@dataclass(frozen=True)
class Fault:
    kind: str
    node: str
    gpu: int
    clock_factor: float = 1.0
    celsius: float = 0.0
    width: int = 0


@dataclass(frozen=True)
class FleetScenario:
    name: str
    seed: int
    duration_s: float
    period_s: float
    blocks: tuple[tuple[str, int, int, tuple[str, ...]], ...]   # (model key, nodes, gpus per node, drivers)
    mean_busy_s: float
    mean_idle_s: float
    faults: tuple[Fault, ...]


def load_fleet(path: str | Path) -> FleetScenario:
    top = Section(load_yaml(path), path)
    name = top.get("name", str)
    seed = top.get("seed", int, 0)
    duration = top.get("duration_s", float, check=positive)
    period = top.get("sample_period_s", float, 60.0, check=positive)
    blocks = []
    for m in top.sections("models"):
        blocks.append((m.get("model", str, check=one_of(*MODELS)), m.get("nodes", int, check=positive),
                       m.get("gpus_per_node", int, 8, check=positive),
                       tuple(m.get("drivers", list, ["550.54.15"]))))
        m.finish()
    if not blocks:
        raise top.error("models", "at least one model is required")
    busy = top.section("busy", {}) or Section({}, path, "busy")
    mean_busy, mean_idle = busy.get("mean_busy_s", float, 14400.0, positive), busy.get("mean_idle_s", float, 3600.0, positive)
    busy.finish()
    nodes = {f"{key}-n{i:02d}": gpus for key, count, gpus, _ in blocks for i in range(count)}
    faults = []
    for f in top.sections("faults"):
        kind, node, gpu = f.get("kind", str, check=one_of(*FAULT_KINDS)), f.get("node", str), f.get("gpu", int)
        if node not in nodes or not 0 <= gpu < nodes[node]:
            raise f.error("node", f"no GPU {gpu} on {node!r} in this fleet")
        faults.append(Fault(kind, node, gpu, f.get("clock_factor", float, 0.4, positive),
                            f.get("celsius", float, 15.0, positive), f.get("width", int, 8, positive)))
        f.finish()
    top.finish()
    return FleetScenario(name, seed, duration, period, tuple(blocks), mean_busy, mean_idle, tuple(faults))


@dataclass(frozen=True)
class FleetSeries:
    """times × GPUs arrays, as the node agents export them; ``gpus`` names each column."""
    times: np.ndarray                    # seconds from the start
    gpus: list[tuple[str, str]]          # (node, gpu)
    model: list[str]
    driver: list[str]
    utilization: np.ndarray
    sm_active: np.ndarray
    sm_clock: np.ndarray
    sm_clock_max: np.ndarray             # per GPU
    power: np.ndarray
    power_limit: np.ndarray              # per GPU
    temperature: np.ndarray
    pcie_gen: np.ndarray
    pcie_gen_max: np.ndarray             # per GPU
    pcie_width: np.ndarray
    pcie_width_max: np.ndarray           # per GPU
    faults: tuple[Fault, ...]


def _busy(rng: np.random.Generator, n: int, period: float, mean_busy: float, mean_idle: float) -> np.ndarray:
    """One node's load: alternating idle gaps and jobs of exponential length; the fleet is in its steady
    state at the start (a node is busy with the share of time jobs take), as a fleet that ran before."""
    out = np.zeros(n, dtype=bool)
    i, busy = 0, bool(rng.random() < mean_busy / (mean_busy + mean_idle))
    while i < n:
        length = max(1, int(rng.exponential(mean_busy if busy else mean_idle) / period))
        out[i:i + length] = busy
        i, busy = i + length, not busy
    return out


def simulate_fleet(sc: FleetScenario) -> FleetSeries:
    rng = np.random.default_rng(sc.seed)
    n = int(sc.duration_s // sc.period_s)
    gpus, model, driver, hw, busy_cols, inlet = [], [], [], [], [], []
    for key, count, per_node, drivers in sc.blocks:
        h = HARDWARE[MODELS[key]]
        for i in range(count):
            node = f"{key}-n{i:02d}"
            busy = _busy(rng, n, sc.period_s, sc.mean_busy_s, sc.mean_idle_s)
            node_inlet = 25.0 + rng.normal(0, INLET_SD_C)
            activity = np.where(busy, rng.uniform(0.75, 0.98), 0.0)   # the job's SM activity (per node, constant)
            for g in range(per_node):
                gpus.append((node, str(g)))
                model.append(h.name)
                driver.append(drivers[i % len(drivers)])
                hw.append(h)
                busy_cols.append(activity)
                inlet.append(node_inlet)
    g = len(gpus)
    act = np.stack(busy_cols, axis=1)
    loaded = act > 0
    max_clock = np.array([h.max_clock_hz for h in hw])
    limit = np.array([h.power_limit_w for h in hw])
    idle = np.array([h.idle_w for h in hw])
    full = np.array([h.full_w for h in hw]) * rng.normal(1.0, SILICON_SD, g)
    r_th = np.array([h.thermal_c_per_w for h in hw]) * rng.normal(1.0, SLOT_THERMAL_SD, g)
    gen_max = np.array([h.pcie_gen for h in hw])
    width_max = np.array([h.pcie_width for h in hw])
    cap = np.ones(g)
    hot = np.zeros(g)
    width = width_max.astype(float).copy()
    index = {k: i for i, k in enumerate(gpus)}
    for f in sc.faults:
        col = index[(f.node, str(f.gpu))]
        if f.kind == "slow":
            cap[col] = f.clock_factor
        elif f.kind == "hot":
            hot[col] = f.celsius
        else:
            width[col] = f.width
    t = len(act)
    sm_active = act * (1 + rng.normal(0, 0.01, (t, g)))
    # Dynamic power scales with activity and clock; at the limit the clock gives way (the power brake).
    demand = idle + (full - idle) * sm_active * cap
    clock_ratio = np.minimum(cap, cap * np.clip((limit - idle) / np.maximum(demand - idle, 1e-9), 0, 1) ** 0.5)
    power = np.where(loaded, np.minimum(demand, limit), idle) * (1 + rng.normal(0, POWER_NOISE, (t, g)))
    clock = np.where(loaded, clock_ratio * max_clock, 0.2 * max_clock) * (1 + rng.normal(0, CLOCK_NOISE, (t, g)))
    temp = np.array(inlet) + r_th * power + hot * (power / limit) + rng.normal(0, TEMP_NOISE_C, (t, g))
    # An idle link drops to a lower generation to save power; under load it trains to what it can.
    gen = np.where(loaded, gen_max, 1).astype(float)
    lanes = np.broadcast_to(width, (t, g)).astype(float)
    return FleetSeries(np.arange(t) * sc.period_s, gpus, model, driver, np.where(loaded, BUSY_UTILIZATION, 0.0),
                       np.clip(sm_active, 0, 1), clock, max_clock, power, limit, temp, gen, gen_max, lanes,
                       width_max.astype(float), sc.faults)
