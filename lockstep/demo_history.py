"""The demo cluster's past month, backfilled before the live run (``lockstep demo --history-days``).

Jobs come and go on the demo cluster (one simulator run per job, each continuing the counters of
the one before: ``lockstep.simulator.counters``), with a few faults that recur on the same parts, checkpoints
long enough to see at the history's step, and rack power all along. It is written as a long-term
store would keep it: every ``STEP_S`` and only what the report reads and the inputs of the
recording rules the dashboards read (``history_metrics``); what the analytics service would have
exported for those jobs comes from the simulator's ground truth (``analytics_blocks``). The live
run starts from the last job's counters and the dashboards' recorded series are evaluated over the
month as a running Prometheus would have (``lockstep.backfill_rules``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lockstep.backfill.blocks import BlockWriter
from lockstep.backfill.sim import block_duration, series_prefixes, stream
from lockstep.demo_jobs import JOBS, Job, scenario_of

STEP_S = 300.0        # Prometheus' lookback: every query point still sees a sample


@dataclass(frozen=True)
class History:
    start: float            # first sample
    end: float              # last sample
    samples: int
    counters: dict          # the hardware counters at ``end``, for the live run to continue


def history_metrics() -> set[str]:
    """What the report reads, what the dashboards' recording rules read, and the cluster-wide series
    the power dashboard shows raw (rack power and cooling); per-GPU panels stay live-only."""
    from lockstep.backfill.sim import preset_metrics
    from lockstep.exporters.catalog import power as P
    return preset_metrics("report") | rule_inputs() | {P.CHASSIS_POWER.name, P.COOLANT_TEMPERATURE.name}


def dashboard_rules() -> list[dict]:
    """The recording rules whose series a dashboard reads, and those they read in turn."""
    from lockstep.alerts import config as alerts_config
    from lockstep.alerts import recording
    from lockstep.dashboards.build import build_all
    from lockstep.dashboards.promql import metric_names
    every = [r for g in recording.groups(alerts_config.load(None)) for r in g["rules"]]
    rules: dict[str, list[dict]] = {}   # a name may have several rules (one per state, window or baseline)
    for r in every:
        rules.setdefault(r["record"], []).append(r)
    wanted = {n for board in build_all().values() for p in board.get("panels", []) for t in p.get("targets", [])
              for n in metric_names(t.get("expr", "")) if n in rules}
    while more := {n for r in wanted for rule in rules[r] for n in metric_names(rule["expr"]) if n in rules} - wanted:
        wanted |= more
    return [r for r in every if r["record"] in wanted]


def dashboard_rule_groups() -> list[dict]:
    """``dashboard_rules`` as rule groups: every one at the history's step, but the fleet's event history at
    its own hourly interval (each evaluation reads a month of counters)."""
    from lockstep.alerts.recording import FLEET_INTERVAL, fleet_history
    from lockstep.alerts.settings import AlertsConfig
    hourly = {r.record for r in fleet_history(AlertsConfig())}
    rules = dashboard_rules()
    return [{"name": "history", "interval": f"{int(STEP_S)}s", "rules": [r for r in rules if r["record"] not in hourly]},
            {"name": "history-hourly", "interval": FLEET_INTERVAL, "rules": [r for r in rules if r["record"] in hourly]}]


def rule_inputs() -> set[str]:
    from lockstep.dashboards.promql import metric_names
    recorded = {r["record"] for r in dashboard_rules()}
    return {n for r in dashboard_rules() for n in metric_names(r["expr"])} - recorded


SAMPLES_PER_FILE = 2_000_000   # small files, two promtool runs at once: both cores busy, ~300 MB each


def write_history(cluster: dict, out: Path, end: float, days: float, jobs: tuple[Job, ...] = JOBS) -> History:
    """``days`` of ``jobs`` (laid end to end, stretched to fill them) on ``cluster`` (a scenario's
    ``cluster`` section), the last sample a step before ``end``, as blocks under ``out``."""
    from lockstep.simulator.counters import of as counters_of
    from lockstep.simulator.model import Model

    metrics = history_metrics()
    ticks = max(1, math.floor(days * 86400.0 / STEP_S))
    start = end - ticks * STEP_S
    runs = _runs(cluster, jobs, start, ticks)
    blocks = [_blocks(sc, job.user, metrics) for sc, _, job in runs]
    names = list(dict.fromkeys(p for bs in blocks for p in series_prefixes(bs)))
    where = {p: i for i, p in enumerate(names)}
    counters = None
    with BlockWriter(out, names, block_duration(ticks * STEP_S), SAMPLES_PER_FILE, jobs=2) as writer:
        for (scenario, n, _), bs in zip(runs, blocks):
            index = np.array([where[p] for p in series_prefixes(bs)], dtype=np.int64)
            counters = counters_of(stream(Model(scenario, counters=counters), bs, n, writer, index))
    return History(start, end - STEP_S, writer.samples, counters)


def backfill_month(cluster: dict, prometheus_dir: Path, days: float, now: float) -> tuple[History, Path]:
    """The history, then the dashboards' recorded series over it, into ``prometheus_dir/data`` (a
    Prometheus' dir for ``start_prometheus``); the counters document for the live run beside it."""
    import json

    from lockstep.backfill.rules import backfill_rules
    history = write_history(cluster, prometheus_dir / "data", now // STEP_S * STEP_S, days)
    backfill_rules(dashboard_rule_groups(), prometheus_dir, history.start, history.end)
    # The live node agents start counting XIDs afresh, as restarted agents do: the past ones stay past.
    live = {k: v for k, v in history.counters.items() if k != "xid_events"}
    counters = prometheus_dir.parent / "history-counters.json"
    counters.write_text(json.dumps({"timestamp": history.end, "counters": live}) + "\n")
    return history, counters


def _runs(cluster: dict, jobs: tuple[Job, ...], start: float, ticks: int) -> list[tuple[object, int, Job]]:
    """Each job's scenario and its share of the ticks, proportional to its days."""
    total = sum(j.days for j in jobs)
    bounds = np.round(np.cumsum([0.0] + [j.days for j in jobs]) / total * ticks).astype(int)
    return [(scenario_of(job, cluster, start + a * STEP_S, (b - a) * STEP_S, STEP_S), int(b - a), job)
            for job, a, b in zip(jobs, bounds[:-1], bounds[1:]) if b > a]


def _blocks(scenario, user: str, metrics: set[str]) -> list:
    """The simulator's series of ``metrics`` (the job's GPUs held by ``user``) and the analytics'."""
    import dataclasses

    from lockstep.exporters.catalog import gpu as G
    from lockstep.simulator.blocks import build_blocks
    from lockstep.simulator.model import Model
    blocks = [b for b in build_blocks(Model(scenario).topo) if b.metric.name in metrics and not idle(b)]
    blocks = [dataclasses.replace(b, labels={**b.labels, "user": np.full(b.size, user)}) if b.metric == G.JOB_INFO
              else b for b in blocks]
    return blocks + analytics_blocks(scenario)


def idle(block) -> bool:
    """The idle clock-event reason: the report counts throttling only, and a month of it per GPU
    would be an eighth of the history."""
    from lockstep.exporters.catalog import gpu as G
    from lockstep.exporters.catalog.enums import IDLE_REASON
    return block.metric == G.CLOCK_EVENT and block.labels["reason"][0] == IDLE_REASON


def analytics_blocks(scenario) -> list:
    """What ``lockstep analytics serve`` exports for the job, from the simulator's ground truth (what
    a perfect scorer would say): lost GPU-seconds per cause, the stall in progress and its cause (the
    cause that blocked the job for most of the interval, when that is at least half of it),
    allocated GPU-seconds and goodput, and the job's imbalance."""
    from lockstep.exporters.catalog import analytics as A
    from lockstep.simulator.blocks import Block
    from lockstep.simulator.job import CAUSES
    from lockstep.simulator.topology import Topology

    job, gpus, period = scenario.job.job_id, int(Topology(scenario).job_gpus.sum()), scenario.sample_period_s
    causes = list(CAUSES)
    per_cause = {"node": np.full(len(causes), ""), "job_id": np.full(len(causes), job), "cause": np.array(causes)}
    one = {"node": np.array([""]), "job_id": np.array([job])}
    previous: dict[str, float] = {}
    counted = dict.fromkeys(causes, 0.0)

    def lost(s) -> np.ndarray:
        """Never down: the model's float rounding can take a cause a hair below zero (a counter
        that drops reads as a reset)."""
        counted.update({c: max(counted[c], s.lost_gpu_s[c]) for c in causes})
        return np.array([counted[c] for c in causes])

    def stalled(s) -> np.ndarray:
        blocked = {c: s.lost_gpu_s[c] - previous.get(c, 0.0) for c in ("checkpoint", "hang", "network")}
        previous.update(s.lost_gpu_s)
        cause = max(blocked, key=blocked.get)
        return np.array([float(c == cause and blocked[cause] >= 0.5 * gpus * period) for c in causes])

    allocated = lambda s: np.array([gpus * period * s.k])  # noqa: E731
    return [Block(A.JOB_LOST_GPU_SECONDS, per_cause, lost),
            ledger_block(scenario),
            Block(A.JOB_STALLED, per_cause, stalled),
            Block(A.JOB_ALLOCATED_GPU_SECONDS, one, allocated),
            Block(A.JOB_GOODPUT, one, lambda s: 1.0 - sum(s.lost_gpu_s.values()) / np.maximum(allocated(s), 1.0)),
            *imbalance_blocks(scenario)]


def ledger_block(scenario):
    """The job's goodput ledger as the service exports it, from the ground truth (the model's own
    ledger: every GPU-second productive or lost to one kind and cause)."""
    from lockstep.exporters.catalog import analytics as A
    from lockstep.exporters.catalog.enums import LEDGER
    from lockstep.simulator.blocks import Block

    keys = [(kind, cause) for kind, causes in LEDGER.items() for cause in causes]
    labels = {"node": np.full(len(keys), ""), "job_id": np.full(len(keys), scenario.job.job_id),
              "kind": np.array([k for k, _ in keys]), "cause": np.array([c for _, c in keys])}
    counted = np.zeros(len(keys))

    def booked(s) -> np.ndarray:
        """Never down (a counter that drops reads as a reset), as the lost GPU-seconds."""
        counted[:] = np.maximum(counted, [s.ledger[k][c] for k, c in keys])
        return counted.copy()

    return Block(A.JOB_LEDGER_GPU_SECONDS, labels, booked)


def imbalance_blocks(scenario) -> list:
    """The job's imbalance as the service exports it, from the ground truth: the GPUs of a worker
    group (``noise.groups``) with their ratio to the median, and the GPU-seconds the ranks spent
    waiting (the model's, spread and jitter included, where the job has a group; none where its
    ranks differ by the silicon spread alone, as the service finds nobody 5% off the median)."""
    from lockstep.exporters.catalog import analytics as A
    from lockstep.simulator.blocks import Block
    from lockstep.simulator.truth import imbalanced

    job, slow = scenario.job.job_id, imbalanced(scenario)
    waited = [0.0]

    def lost(s) -> np.ndarray:
        waited[0] = max(waited[0], s.imbalance_gpu_s) if slow else 0.0     # a counter never goes down
        return np.array([waited[0]])

    blocks = [Block(A.JOB_IMBALANCE_LOST_GPU_SECONDS, {"node": np.array([""]), "job_id": np.array([job])}, lost)]
    if slow:
        labels = {k: np.array([g[k] for g in slow]) for k in ("node", "job_id", "gpu")}
        ratios = np.array([1.0 / g["speed"] for g in slow])
        blocks.append(Block(A.JOB_IMBALANCE_RATIO, labels, lambda s: ratios))
    return blocks
