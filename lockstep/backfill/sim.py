"""``lockstep sim backfill SCENARIO --days N --out DIR``: a simulated cluster's history as TSDB blocks.

The model runs once, tick by tick, from ``--start`` (or back from ``--end``); every chunk of ticks
goes to ``lockstep.backfill.BlockWriter``, so a month of 128 GPUs or half an hour of 16,384 needs
no more memory than a chunk and one promtool file. ``--step`` samples coarser than the scenario
(as a downsampled long-term store keeps it); ``--metrics`` keeps only what a consumer reads: the
analytics service, the monthly report, the dashboards (with the inputs of the recording rules they
read), or a list of catalog names.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from lockstep.backfill.blocks import BlockWriter, series_prefix

LINES_PER_CHUNK = 500_000        # samples turned into text at once (~60 MB of lines)


@dataclass(frozen=True)
class Written:
    samples: int
    series: int
    files: int
    start: float
    end: float
    skipped: tuple[str, ...]     # metrics asked for that the simulator does not produce
    rss_mb: float                # peak resident memory of this process
    promtool_rss_mb: float       # ... and of the largest promtool run (it maps its input file)
    cpu_s: float                 # CPU seconds of this process
    promtool_cpu_s: float        # ... and of every promtool run


def preset_metrics(name: str) -> set[str]:
    """The catalog metrics a consumer reads: ``analytics``, ``report`` or ``dashboards``."""
    from lockstep.dashboards.promql import metric_names
    if name == "analytics":
        from lockstep.analytics.frame.inputs import INPUT_METRICS
        return set(INPUT_METRICS)
    if name == "report":
        from lockstep.analytics.report.coverage import PRESENCE_METRICS
        from lockstep.analytics.report.queries import Steps, monthly_queries
        return set(PRESENCE_METRICS).union(*(metric_names(q.promql) for q in monthly_queries(Steps())))
    if name == "dashboards":
        return _dashboard_metrics(metric_names)
    raise ValueError(f"unknown metric set {name!r}: analytics, report, dashboards or catalog metric names")


def _dashboard_metrics(metric_names) -> set[str]:
    """Every name a panel or variable reads, a recorded series standing for the rule's own inputs."""
    from lockstep.alerts import config as alerts_config
    from lockstep.alerts import recording
    from lockstep.dashboards.build import build_all
    from lockstep.dashboards.promql import variable_metric_names
    exprs = {r["record"]: r["expr"] for g in recording.groups(alerts_config.load(None)) for r in g["rules"]}
    names: set[str] = set()
    for board in build_all().values():
        for panel in board.get("panels", []):
            names |= {n for t in panel.get("targets", []) for n in metric_names(t.get("expr", ""))}
        names |= {n for v in board.get("templating", {}).get("list", []) for n in variable_metric_names(v.get("query", ""))}
    while recorded := {n for n in names if n in exprs}:
        names = (names - recorded) | set().union(*(metric_names(exprs[n]) for n in recorded))
    return names


def resolve_metrics(spec: str) -> set[str] | None:
    """``--metrics``: ``all`` (None), or a comma list of set names and catalog metric names."""
    from lockstep.exporters.catalog import CATALOG
    if spec == "all":
        return None
    names: set[str] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        names |= {part} if part in CATALOG else preset_metrics(part)
    return names


def backfill_scenario(scenario, out: Path, days: float, step: float | None = None, start: float | None = None,
                      metrics: Iterable[str] | None = None, samples_per_file: int | None = None,
                      jobs: int = 1) -> Written:
    """``days`` of ``scenario`` (sampled every ``step``, default its own period; from ``start``,
    default its own start) as blocks under ``out``. The scenario's faults keep their times from its
    start; after its ``duration_s`` the job runs on without faults."""
    from lockstep.exporters.catalog import CATALOG
    from lockstep.simulator.blocks import build_blocks
    from lockstep.simulator.model import Model

    scenario = dataclasses.replace(scenario, sample_period_s=step or scenario.sample_period_s,
                                   start_timestamp=scenario.start_timestamp if start is None else start)
    model = Model(scenario)
    blocks = build_blocks(model.topo)
    wanted = None if metrics is None else set(metrics)
    skipped = tuple(sorted(n for n in wanted - {b.metric.name for b in blocks} if n in CATALOG)) if wanted else ()
    blocks = [b for b in blocks if wanted is None or b.metric.name in wanted]
    prefixes = series_prefixes(blocks)
    ticks = max(1, math.ceil(days * 86400.0 / scenario.sample_period_s))
    limit = {"samples_per_file": samples_per_file} if samples_per_file else {}
    with BlockWriter(out, prefixes, block_duration(ticks * scenario.sample_period_s), jobs=jobs, **limit) as writer:
        stream(model, blocks, ticks, writer)
    end = scenario.start_timestamp + (ticks - 1) * scenario.sample_period_s
    return Written(writer.samples, len(prefixes), writer.files, scenario.start_timestamp, end, skipped, *_usage())


def _usage() -> tuple[float, float, float, float]:
    """Peak RSS (MB) and CPU seconds of this process and of its children (the promtool runs)."""
    import resource
    me, them = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_maxrss / 1024.0, them.ru_maxrss / 1024.0, me.ru_utime + me.ru_stime, them.ru_utime + them.ru_stime


def series_prefixes(blocks) -> list[str]:
    """``name{labels}`` of every series of ``blocks``, in their row order."""
    return [series_prefix(b.metric.name, str(b.labels["node"][i]), {k: str(v[i]) for k, v in b.labels.items()})
            for b in blocks for i in range(b.size)]


def stream(model, blocks, ticks: int, writer: BlockWriter, index: np.ndarray | None = None):
    """``ticks`` of ``model`` into ``writer``, in chunks of LINES_PER_CHUNK samples, a new promtool file
    at each block window; ``index`` maps the rows of ``blocks`` to the writer's series (default: the
    same order). The scrapes the scenario's noise misses are absent, as in the series frame. Returns
    the last state."""
    from lockstep.simulator.series import missed_nodes, node_rows, tick_values
    rows = sum(b.size for b in blocks)
    index = np.arange(rows) if index is None else index
    node_of_row = node_rows(blocks)
    chunk = max(1, min(LINES_PER_CHUNK, writer.limit) // max(rows, 1))
    values, stamps, window, state = [], [], None, None
    for state in model.states(ticks):
        if writer.window_of(state.timestamp) != window:
            _add(writer, values, stamps, index)
            writer.next_file()
            values, stamps, window = [], [], writer.window_of(state.timestamp)
        values.append(tick_values(blocks, node_of_row, state, missed_nodes(model, state.k)))
        stamps.append(state.timestamp)
        if len(stamps) == chunk:
            _add(writer, values, stamps, index)
            values, stamps = [], []
    _add(writer, values, stamps, index)
    return state


def _add(writer: BlockWriter, values: list[np.ndarray], stamps: list[float], index: np.ndarray) -> None:
    """One chunk, tick after tick (each series in time order)."""
    if stamps:
        writer.add(np.tile(index, len(stamps)), np.concatenate(values), np.repeat(np.asarray(stamps), len(index)))


def block_duration(span_s: float) -> str:
    """Blocks as long as the range, up to promtool's 486 h (a month in two or three blocks)."""
    return f"{max(2, math.ceil(span_s / 3600.0))}h"
