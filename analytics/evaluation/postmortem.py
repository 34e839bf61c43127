"""``lockstep analytics evaluate --prometheus-url URL --from T --to T [--job ID]``: a post-mortem.

The evaluation report of a past window read from Prometheus (or Thanos, Mimir, VictoriaMetrics),
scored by the service's own code: its source, its fetch (each input in pieces into preallocated
matrices, so a long window never sits in memory as JSON) and its scoring (``Refresher.score``), over
the whole window at once as ``evaluate SCENARIO.yaml`` scores a whole run. The jobs are those on
``lockstep_gpu_job_info`` at any time in the window, listed an hour at a time. NCCL's RAS inputs, which only
name the ranks a hang waits for, are read for a job whose stalls read as a hang, and it is scored again with them.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from lockstep.analytics.evaluation import evaluate
from lockstep.analytics.frame.inputs import RAS_INPUTS
from lockstep.analytics.prom import promql
from lockstep.analytics.prom.auth import PromAuth, check_url
from lockstep.analytics.prom.errors import PrometheusError
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.prom.session import open_session
from lockstep.analytics.scoring.score import JobResult
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.refresh import Refresher, split_job_ids
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.catalog.enums import HANG
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.version import VERSION

log = logging.getLogger("lockstep.analytics")

LIST_SPAN_S = 3600.0     # jobs are listed over pieces of the window this long (bounded samples per query)


@dataclass(frozen=True)
class PostMortem:
    prometheus_url: str
    start: float               # --from
    end: float                 # --to
    step_s: float = 5.0
    job_id: str | None = None
    timeout_s: float = 120.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1     # (a post-mortem holds no window between refreshes)
    auth: PromAuth = PromAuth()   # how requests reach the store (the flags ``lockstep.analytics.prom.auth`` adds)

    def __post_init__(self) -> None:
        check_url(self.prometheus_url, self.auth)
        if not self.start < self.end:
            raise ValueError(f"--from ({self.start:g}) must be before --to ({self.end:g})")
        if not 0 < self.step_s < math.inf or not 0 < self.timeout_s < math.inf:
            raise ValueError("--step and --timeout must be positive and finite")
        if self.job_id is not None:
            promql.validate_job_id(self.job_id)

    @property
    def window_s(self) -> float:
        return self.window.end - self.window.start + self.step_s

    @property
    def window(self) -> Window:
        """From --from, every step up to --to."""
        return Window(self.start, self.start + math.floor((self.end - self.start) / self.step_s + 1e-9) * self.step_s,
                      self.step_s)


async def post_mortem(pm: PostMortem) -> dict:
    """The report of the window; raises PrometheusError when the jobs cannot be listed."""
    window = pm.window
    async with open_session(pm.prometheus_url, pm.auth, user_agent=f"lockstep-analytics/{VERSION}") as session:
        source = PrometheusSource(session, pm.prometheus_url, pm.timeout_s)
        jobs = await _jobs_in(source, window)
        if pm.job_id is not None:
            jobs = [j for j in jobs if j == pm.job_id]
        mine, rejected = split_job_ids(jobs, pm.shard)
        refresher = Refresher(source, pm, leave_out=frozenset(i.name for i in RAS_INPUTS))
        scored, failed = await refresher.score(mine, window) if mine else ({}, {})
        scored = {job_id: await _hangs_localised(refresher, job_id, window, res) for job_id, res in scored.items()}
        scored = {job_id: await refresher.checkpoint_targets(job_id, res) for job_id, res in scored.items()}
    return _report(pm, window, evaluate.report(None, scored), mine, rejected, failed)


async def _hangs_localised(refresher: Refresher, job_id: str, window: Window, res: JobResult) -> JobResult:
    """The job's result, scored again with NCCL's RAS inputs where it hung: they only name the ranks a hang
    waits for (``lockstep.analytics.scoring.hang``), and are the window's costliest queries, so a job that never
    hung is scored without them."""
    if not (res.causes == HANG).any():
        return res
    try:
        again = await refresher.with_inputs(job_id, window, RAS_INPUTS)
    except PrometheusError as exc:
        log.warning("RAS inputs not read; the hang is not localised", extra=kv(job_id=job_id, err=str(exc)[:500]))
        return res
    return again if again is not None else res


async def _jobs_in(source: PrometheusSource, window: Window) -> list[str]:
    """Every job id on lockstep_gpu_job_info at any time in ``window`` (an hour per query)."""
    pieces = max(1, math.ceil((window.end - window.start) / LIST_SPAN_S))
    span = (window.end - window.start) / pieces
    seen: set[str] = set()
    for k in range(1, pieces + 1):
        seen.update(await source.list_jobs(window.start + k * span, lookback_s=span))
    return sorted(seen)


def _report(pm: PostMortem, window: Window, rep: dict, jobs: list[str], rejected: list[str],
            failed: dict[str, str]) -> dict:
    """The contract's report with the window it covers and unix times next to the offsets from --from."""
    for d in rep["stragglers"]:
        d["first_detected"] = window.start + d["first_detected_s"]
    for s in rep["stalls"] + rep.get("slowdowns", []):
        s["start"], s["end"] = window.start + s["start_s"], window.start + s["end_s"]
    for h in rep["hangs"]:
        h["first_named"], h["last_named"] = window.start + h["first_named_s"], window.start + h["last_named_s"]
    head = {"prometheus_url": pm.prometheus_url, "from": window.start, "to": window.end, "step_s": window.step,
            **({"job": pm.job_id} if pm.job_id is not None else {}), "jobs": jobs}
    tail = {"rejected_job_ids": rejected} if rejected else {}
    if failed:
        tail["errors"] = failed
    return {**head, **{k: v for k, v in rep.items() if k != "scenario"}, **tail}


def format_text(rep: dict) -> str:
    title = (f"post-mortem {_utc(rep['from'])} .. {_utc(rep['to'])} from {rep['prometheus_url']}: "
             f"{len(rep['jobs'])} job{'s' if len(rep['jobs']) != 1 else ''}")
    if not rep["jobs"]:
        return title + (f"; job {rep['job']} is not in the window" if "job" in rep else
                        "; no jobs in the window (lockstep_gpu_job_info)")
    lines = [evaluate.format_text(rep, title)]
    lines += [f"  error      job {j}: {e}" for j, e in rep.get("errors", {}).items()]
    return "\n".join(lines)


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
