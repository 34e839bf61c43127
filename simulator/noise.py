"""The spread and jitter of a real cluster (scenario key ``noise``, FORMATS.md), seeded.

Real ranks are not identical apart from faults: silicon and power capping leave each GPU a few
percent off its peers, nodes differ, every step takes a little more or less, sensors read with
noise, scrapes go missing, and the top of a rack runs warmer than the bottom. ``noise: none`` turns
all of it off (exact tests); the realistic default comes from field data, the jitter calibrated to
the per-iteration coefficient of variation across the workers of 100 real Alibaba PAI jobs
(tests/fixtures/pai/coefficient_variation.csv; tests/simulator/test_noise.py checks the shape).

Noise draws come from their own random streams, so ``noise: none`` reproduces the exact model
number for number, and the static draws depend on the seed alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from lockstep.simulator import hardware as hw

# Per-job median CoV (σ/μ across the 10 workers of each iteration) of the PAI jobs without worker
# groups (median CoV ≤ 0.2: 65 of 100 jobs), at the deciles 0, 0.1, ..., 1.0 (numpy's linear
# interpolation; tests/simulator/test_noise.py recomputes them from the data). A job's per-iteration CoV
# is drawn from these (``step_cov: pai``) or is the median job's (the default).
PAI_COV_DECILES = (0.0141, 0.0311, 0.0387, 0.0489, 0.0544, 0.0627, 0.0695, 0.0790, 0.0901, 0.1253, 0.1884)
PAI_MEDIAN_COV = PAI_COV_DECILES[5]
PAI_WORKERS = 10


def sample_bias(n: int) -> float:
    """E[σ over n draws, ddof 0] / σ for normal draws: a CoV measured across 10 workers reads ~8% low."""
    return math.sqrt(2.0 / (n - 1)) * math.gamma(n / 2) / math.gamma((n - 1) / 2) * math.sqrt((n - 1) / n) \
        if n > 1 else 1.0


@dataclass(frozen=True)
class Group:
    """A share of the job's GPUs (by rank order, from the last rank down) running at ``speed`` of
    the rest from the start: a heavier pipeline stage (speed < 1), a lighter one (> 1)."""

    share: float
    speed: float


@dataclass(frozen=True)
class Noise:
    gpu_speed_spread: float = 0.015      # σ of each GPU's static speed (silicon, power-cap clocks)
    node_speed_spread: float = 0.01      # σ of each node's (CPU, memory, PCIe, cooling)
    step_cov: float | str = PAI_MEDIAN_COV   # total per-iteration CoV across ranks, or "pai": drawn
    sensor: float = 0.005                # σ of activity sensor readings (absolute ratio)
    missed_scrapes: float = 0.002        # share of (node, sample) scrapes missing in the series
    rack_temperature_c: float = 4.0      # inlet rise from a rack's bottom slot to its top one
    power_cap_share: float = 0.8         # share of busy GPUs holding sw_power_cap in a sample
    power_cap_clock: float = 0.02        # how far below max a power-capped clock sits (up to)
    groups: tuple[Group, ...] = ()
    transients_per_gpu_hour: float = 0.0  # slow_rank transients added at random (1.5-2x, 10-60 s)

    @property
    def on(self) -> bool:
        return self != NONE


NONE = Noise(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, (), 0.0)
REALISTIC = Noise()


@dataclass(frozen=True)
class Draws:
    """The static part of a scenario's noise, drawn once from its seed."""

    noise: Noise
    seed: int
    n_gpus: int
    gpus_per_node: int
    job_gpus: np.ndarray

    def rng(self, what: int) -> np.random.Generator:
        """One stream per static draw: each is the same whichever is drawn first."""
        return np.random.default_rng([self.seed, 0x401_5E, what])

    @cached_property
    def speed(self) -> np.ndarray:
        """Per GPU, static speed (1 nominal): GPU spread × node spread × the GPU's group."""
        nz, nodes = self.noise, self.n_gpus // self.gpus_per_node
        gpu = np.exp(self.rng(1).normal(0.0, nz.gpu_speed_spread, self.n_gpus))
        node = np.repeat(np.exp(self.rng(2).normal(0.0, nz.node_speed_spread, nodes)), self.gpus_per_node)
        return gpu * node * self.group_speed

    @cached_property
    def group_speed(self) -> np.ndarray:
        out = np.ones(self.n_gpus)
        members = np.flatnonzero(self.job_gpus)[::-1]      # from the last rank down
        taken = 0
        for g in self.noise.groups:
            count = int(round(g.share * len(members)))
            out[members[taken:taken + count]] = g.speed
            taken += count
        return out

    @cached_property
    def step_cov(self) -> float:
        """The job's per-iteration CoV of rank step times as measured across ``PAI_WORKERS`` workers:
        as set, or drawn from the PAI jobs'."""
        cov = self.noise.step_cov
        if isinstance(cov, float):
            return cov
        return float(np.interp(self.rng(3).uniform(), np.linspace(0, 1, len(PAI_COV_DECILES)), PAI_COV_DECILES))

    @cached_property
    def jitter(self) -> float:
        """Per-iteration σ of a rank's compute time. A rank's step is compute plus an all-reduce that
        takes every rank the same time, so the step's CoV is the compute's times its share of the step;
        the static spread takes its part of the rest."""
        nz = self.noise
        compute_cov = self.step_cov / sample_bias(PAI_WORKERS) / hw.COMPUTE_SHARE
        static = np.hypot(nz.gpu_speed_spread, nz.node_speed_spread)
        return float(np.sqrt(max(compute_cov ** 2 - static ** 2, 0.0)))

    @cached_property
    def clock_offset(self) -> np.ndarray:
        """Per GPU, how far below max its clock sits while power-capped (0 … ``power_cap_clock``)."""
        return self.rng(4).uniform(0.0, self.noise.power_cap_clock, self.n_gpus)

    def tick_rng(self, k: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, 0x401_5E, k])

    def missed(self, k: int, nodes: int) -> np.ndarray:
        """Per node, whether its scrape at tick ``k`` is missing from the series."""
        if not self.noise.missed_scrapes:
            return np.zeros(nodes, dtype=bool)
        return np.random.default_rng([self.seed, 0x5C4A9E, k]).uniform(size=nodes) < self.noise.missed_scrapes

    def transients(self, scenario, nodes: tuple[str, ...], fault: type) -> tuple:
        """``slow_rank`` faults at random: 1.5-2x for 10-60 s, ``transients_per_gpu_hour`` on average,
        on the job's GPUs, starting after the first minute (the scorer's baseline is being learned).
        ``fault`` is the scenario's fault record (the scenario module reads this one's noise settings)."""
        rate = self.noise.transients_per_gpu_hour
        span = scenario.duration_s - 120.0
        if not rate or span <= 0:
            return ()
        rng = np.random.default_rng([self.seed, 0x7A4_5E])
        gpus = np.flatnonzero(self.job_gpus)
        count = rng.poisson(rate * len(gpus) * scenario.duration_s / 3600.0)
        out = []
        for _ in range(count):
            g = int(rng.choice(gpus))
            start = float(np.round(60.0 + rng.uniform(0, span), 1))
            out.append(fault("slow_rank", start, start + float(np.round(rng.uniform(10, 60), 1)),
                             node=nodes[g // self.gpus_per_node], gpu=g % self.gpus_per_node,
                             slowdown=float(np.round(rng.uniform(1.5, 2.0), 2))))
        return tuple(sorted(out, key=lambda f: f.start_s))

    def power_capped(self, busy: np.ndarray, noisy: np.random.Generator) -> np.ndarray:
        """Per GPU, holding sw_power_cap this sample: a busy GPU, ``power_cap_share`` of the time."""
        share = self.noise.power_cap_share
        return busy & (noisy.uniform(size=len(busy)) < share) if share else np.zeros(len(busy), dtype=bool)

    def capped_clock(self, capped: np.ndarray, noisy: np.random.Generator) -> np.ndarray | float:
        """Clock factor of the power-capped GPUs: their static offset below max and up to 1% more."""
        if not capped.any():
            return 1.0
        return np.where(capped, 1.0 - self.clock_offset - noisy.uniform(0, 0.01, len(capped)), 1.0)

    def inlet_rise(self, slot: np.ndarray) -> np.ndarray | float:
        """Degrees above the rack's bottom slot (0 bottom … 1 top)."""
        return self.noise.rack_temperature_c * slot if self.noise.rack_temperature_c else 0.0

    def sensor(self, values: np.ndarray, running: np.ndarray, noisy: np.random.Generator) -> np.ndarray:
        """Activity as a sensor reads it: ± ``sensor`` while the GPU runs, within 0..1."""
        if not self.noise.sensor:
            return values
        return np.clip(values + noisy.normal(0, self.noise.sensor, len(values)) * running, 0, 1)
