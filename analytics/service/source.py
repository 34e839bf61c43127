"""The refresh's ``Source`` over the Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics):
``lockstep.analytics.frame.inputs``' queries and ``lockstep.analytics.service.resume``'s counters, bound
to one client session, base URL and timeout."""
from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom.answersize import SERVE_DEFAULT
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service import resume
from lockstep.analytics.service.state import LossCounters


@dataclass(frozen=True)
class PrometheusSource:
    session: aiohttp.ClientSession
    base_url: str
    timeout_s: float
    resume_lookback_s: float = 0.0      # 0: jobs never continue exported counters
    max_answer_bytes: int = SERVE_DEFAULT   # of one answer, decompressed (lockstep.analytics.prom.answersize)

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return await source_prom.list_jobs(self.session, self.base_url, at, self.timeout_s, lookback_s,
                                           self.max_answer_bytes)

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...] = ()) -> Block:
        return await source_prom.query_range(self.session, self.base_url, inp.promql(job_id, window.step, nodes),
                                             window, self.timeout_s, self.max_answer_bytes)

    async def instant(self, query: str, at: float) -> list[dict]:
        return await source_prom.api_get(self.session, self.base_url, "/api/v1/query",
                                         {"query": query, "time": f"{at:.3f}"}, self.timeout_s, self.max_answer_bytes)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        if not self.resume_lookback_s:
            return {}
        return await resume.resume(self.session, self.base_url, job_ids, at, self.resume_lookback_s, self.timeout_s,
                                   self.max_answer_bytes)
