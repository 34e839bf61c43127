"""The refresh's ``Source`` over the Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics):
``lockstep.analytics.frame.inputs``' queries and ``lockstep.analytics.service.resume``'s counters, bound
to one client session, base URL and timeout."""
from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom import promql
from lockstep.analytics.prom.answersize import SERVE_DEFAULT
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service import resume
from lockstep.analytics.service.state import LossCounters
from lockstep.exporters.catalog.recorded import ANALYTICS_INPUTS, ANALYTICS_STEP, ANALYTICS_STEP_LABEL, FIRST_RECORDED


@dataclass(frozen=True)
class PrometheusSource:
    session: aiohttp.ClientSession
    base_url: str
    timeout_s: float
    resume_lookback_s: float = 0.0      # 0: jobs never continue exported counters
    recorded_inputs: bool = True        # read the inputs' recorded series where the store holds them
    max_answer_bytes: int = SERVE_DEFAULT   # of one answer, decompressed (lockstep.analytics.prom.answersize)

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return await source_prom.list_jobs(self.session, self.base_url, at, self.timeout_s, lookback_s,
                                           self.max_answer_bytes)

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...] = ()) -> Block:
        return await source_prom.query_range(self.session, self.base_url, inp.promql(job_id, window.step, nodes),
                                             window, self.timeout_s, self.max_answer_bytes)

    async def recorded(self, at: float, step: float, node: str) -> set[str]:
        """The inputs (by name) the store records at ``step`` since before ``at``, ``node``'s among them
        (none when off): one store may hold clusters that record and others that do not."""
        if not self.recorded_inputs or not node:
            return set()
        mine = f"count({ANALYTICS_INPUTS['clock']}{{node={promql.quote(node)}}})"
        groups = await self.instant(f"max by ({ANALYTICS_STEP_LABEL}) ({ANALYTICS_STEP}) and on () {mine}", at)
        return recorded_names(groups, step)

    async def instant(self, query: str, at: float) -> list[dict]:
        return await source_prom.api_get(self.session, self.base_url, "/api/v1/query",
                                         {"query": query, "time": f"{at:.3f}"}, self.timeout_s, self.max_answer_bytes)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        if not self.resume_lookback_s:
            return {}
        return await resume.resume(self.session, self.base_url, job_ids, at, self.resume_lookback_s, self.timeout_s,
                                   self.max_answer_bytes)


def recorded_names(groups: list[dict], step: float) -> set[str]:
    """The inputs every answered group (``ANALYTICS_STEP`` by its ``inputs`` label) records at ``step``: those its
    label names that this version reads recorded (a group without the label: ``FIRST_RECORDED``); none when a
    group records at another step or the answer is not a vector of samples."""
    names = set(ANALYTICS_INPUTS)
    try:
        for group in groups:
            if abs(float(group["value"][1]) - step) >= 1e-6:
                return set()
            listed = group["metric"].get(ANALYTICS_STEP_LABEL)
            names &= set(listed.split(",")) if listed is not None else set(FIRST_RECORDED)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise MalformedAnswer(f"{ANALYTICS_STEP}: not a vector of samples: {str(groups)[:200]}") from None
    return names if groups else set()
