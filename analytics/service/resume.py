"""Loss counters that outlive a replica. A job first seen by this replica (it started, restarted, or the
job moved to it from another shard) continues from the counters last exported for it, as Prometheus
scraped them, instead of starting from zero: the report's increases then neither count the window
before the restart twice (a fresh counter would account the whole window again) nor miss the time the
replica was down (``Refresher._catch_up`` in analytics.refresh accounts it from ``accounted_until``)."""
from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Sequence

import aiohttp

from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom import promql
from lockstep.analytics.prom.answersize import SERVE_DEFAULT
from lockstep.analytics.service.state import LOSS_CAUSES, LossCounters
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.catalog.enums import LEDGER

# The last checkpoint's figures, by the key of ``LossCounters.last_checkpoint`` each continues.
_LAST_CHECKPOINT = {cat.JOB_CHECKPOINT_LAST_START.name: "start_timestamp",
                    cat.JOB_CHECKPOINT_LAST_DURATION.name: "duration_s",
                    cat.JOB_CHECKPOINT_LAST_BYTES.name: "bytes",
                    cat.JOB_CHECKPOINT_LAST_BANDWIDTH.name: "bandwidth_bytes_per_second"}
_NAMES = frozenset([m.name for m in (cat.JOB_ACCOUNTED_UNTIL, cat.JOB_ALLOCATED_GPU_SECONDS, cat.JOB_LOST_GPU_SECONDS,
                                     cat.JOB_IMBALANCE_LOST_GPU_SECONDS, cat.JOB_LEDGER_GPU_SECONDS, cat.JOB_CHECKPOINTS,
                                     cat.JOB_CHECKPOINT_SECONDS, cat.JOB_CHECKPOINT_BYTES,
                                     cat.JOB_CHECKPOINT_LAST_TARGET)] + list(_LAST_CHECKPOINT))
# Labels that tell one series of an exporter from another (not which exporter it is).
_SERIES_LABELS = ("__name__", "kind", "cause", "mount", "fstype")


# Jobs asked for in one query: a replica restarting beside hundreds of running jobs makes a few queries,
# not hundreds, and each URL stays far below the 8 KiB request line most proxies accept.
BATCH = 50


def resume_query(job_ids: Sequence[str], lookback_s: float) -> str:
    """The last exported loss counters of ``job_ids`` (validated, and escaped as regex alternatives:
    Slurm's ``4242+0`` and dotted names must match only themselves)."""
    alternatives = "|".join(re.escape(promql.validate_job_id(j)) for j in job_ids)
    return (f'last_over_time({{__name__=~"{"|".join(sorted(_NAMES))}",job_id=~{promql.quote(alternatives)}}}'
            f"[{int(lookback_s)}s])")


def sample(series: object) -> tuple[dict[str, str], float] | None:
    """The labels and value of one series of an instant vector; None when it is not one (a malformed
    answer loses that series, which then reads as not exported)."""
    labels = series.get("metric") if isinstance(series, dict) else None
    value = series.get("value") if isinstance(series, dict) else None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()) \
            or not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        return None
    try:
        number = float(value[1])
    except ValueError:
        return None
    return (labels, number) if math.isfinite(number) else None


def counters_from(result: list) -> LossCounters | None:
    """The counters of the exporter (``job``/``instance``) that accounted furthest, from an instant
    vector of ``resume_query``; None when none were exported."""
    by_exporter: dict[tuple, dict[str, float]] = defaultdict(dict)
    targets: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for labels, value in filter(None, map(sample, result)):
        if labels.get("__name__") not in _NAMES:
            continue  # not an answer to resume_query (a proxy, a recording rule): not ours to continue
        exporter = tuple(sorted((k, v) for k, v in labels.items() if k not in _SERIES_LABELS))
        if labels["__name__"] == cat.JOB_CHECKPOINT_LAST_TARGET.name:
            targets[exporter].append({k: labels.get(k, "") for k in ("mount", "fstype")})
            continue
        by_exporter[exporter][_key(labels["__name__"], labels.get("kind"), labels.get("cause", ""))] = value
    found = [e for e, v in by_exporter.items() if cat.JOB_ACCOUNTED_UNTIL.name in v]
    if not found:
        return None
    exporter = max(found, key=lambda e: by_exporter[e][cat.JOB_ACCOUNTED_UNTIL.name])
    last = by_exporter[exporter]
    allocated = last.get(cat.JOB_ALLOCATED_GPU_SECONDS.name)
    if allocated is None:
        return None
    # A cause missing from the export (one added since) has lost nothing yet.
    lost = {c: last.get(_key(cat.JOB_LOST_GPU_SECONDS.name, None, c), 0.0) for c in LOSS_CAUSES}
    counters = LossCounters(accounted_until=last[cat.JOB_ACCOUNTED_UNTIL.name], allocated=allocated, lost=lost,
                            imbalance=last.get(cat.JOB_IMBALANCE_LOST_GPU_SECONDS.name, 0.0))
    # The ledger's losses as exported (one missing, exported before it existed, lost nothing yet), and as
    # productive what they leave of the allocation: the ledger goes on summing to it.
    for kind, causes in LEDGER.items():
        for c in causes:
            if kind != "productive":
                counters.ledger[kind][c] = last.get(_key(cat.JOB_LEDGER_GPU_SECONDS.name, kind, c), 0.0)
    counters.ledger["productive"][""] = allocated - sum(v for kind, by_cause in counters.ledger.items()
                                                        if kind != "productive" for v in by_cause.values())
    _continue_checkpoints(counters, last, targets[exporter])
    return counters


def _continue_checkpoints(counters: LossCounters, last: dict[str, float], targets: list[dict[str, str]]) -> None:
    """The checkpoints counted so far, and the last one: a window the new replica scores over it counts it
    once (``LossCounters.add_checkpoints``). Its target where one file system is named (a series of an
    earlier target may still be within the lookback: then none, until the next checkpoint names one)."""
    counters.checkpoints = int(last.get(cat.JOB_CHECKPOINTS.name, 0))
    counters.checkpoint_seconds = last.get(cat.JOB_CHECKPOINT_SECONDS.name, 0.0)
    counters.checkpoint_bytes = last.get(cat.JOB_CHECKPOINT_BYTES.name, 0.0)
    if all(name in last for name in _LAST_CHECKPOINT):
        counters.last_checkpoint = {key: last[name] for name, key in _LAST_CHECKPOINT.items()}
        if len(targets) == 1:
            counters.last_checkpoint.update(targets[0])


def _key(name: str, kind: str | None, cause: str) -> str:
    """A series' key among an exporter's: its name, kind and cause (Prometheus drops an empty label)."""
    return "/".join([name] + ([kind] if kind is not None else []) + ([cause] if cause else []))


def counters_by_job(result: list) -> dict[str, LossCounters]:
    """``counters_from`` for each job of an instant vector of ``resume_query``."""
    by_job: dict[str, list[dict]] = defaultdict(list)
    for series in result if isinstance(result, list) else ():
        if (found := sample(series)) is not None and (job_id := found[0].get("job_id")) is not None:
            by_job[job_id].append(series)
    return {job_id: counters for job_id, rows in by_job.items() if (counters := counters_from(rows)) is not None}


async def resume(session: aiohttp.ClientSession, base_url: str, jobs: list[str], at: float, lookback_s: float,
                 timeout: float, max_bytes: int = SERVE_DEFAULT) -> dict[str, LossCounters]:
    """Counters to continue for ``jobs`` (those with none exported within ``lookback_s`` start afresh)."""
    out: dict[str, LossCounters] = {}
    for first in range(0, len(jobs), BATCH):
        batch = jobs[first:first + BATCH]
        result = await source_prom.api_get(session, base_url, "/api/v1/query",
                                           {"query": resume_query(batch, lookback_s), "time": f"{at:.3f}"}, timeout,
                                           max_bytes)
        found = counters_by_job(result)
        out.update((job_id, found[job_id]) for job_id in batch if job_id in found)
    return out
