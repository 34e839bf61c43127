"""The refresh's ``Source`` over the Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics):
``analytics.inputs``' queries and ``analytics.resume``'s counters, bound to one client session, base
URL and timeout."""
from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from analytics import resume, source_prom
from analytics.answersize import SERVE_DEFAULT
from analytics.decode import Block
from analytics.grid import Window
from analytics.inputs import Input
from analytics.state import LossCounters


@dataclass(frozen=True)
class PrometheusSource:
    session: aiohttp.ClientSession
    base_url: str
    timeout_s: float
    resume_lookback_s: float = 0.0      # 0: jobs never continue exported counters
    max_answer_bytes: int = SERVE_DEFAULT   # of one answer, decompressed (analytics.answersize)

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        return await source_prom.list_jobs(self.session, self.base_url, at, self.timeout_s, lookback_s,
                                           self.max_answer_bytes)

    async def series(self, inp: Input, job_id: str, window: Window, nodes: tuple[str, ...] = ()) -> Block:
        return await source_prom.query_range(self.session, self.base_url, inp.promql(job_id, window.step, nodes),
                                             window, self.timeout_s, self.max_answer_bytes)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        if not self.resume_lookback_s:
            return {}
        return await resume.resume(self.session, self.base_url, job_ids, at, self.resume_lookback_s, self.timeout_s,
                                   self.max_answer_bytes)
