"""The refresh's ``Source`` over the Prometheus HTTP API (or Thanos, Mimir): ``analytics.source_prom``'s
queries and ``analytics.resume``'s counters, bound to one client session, base URL and timeout."""
from __future__ import annotations

from dataclasses import dataclass

import aiohttp
import pandas as pd

from analytics import resume, source_prom
from analytics.state import LossCounters


@dataclass(frozen=True)
class PrometheusSource:
    session: aiohttp.ClientSession
    base_url: str
    timeout_s: float
    resume_lookback_s: float = 0.0      # 0: jobs never continue exported counters

    async def list_jobs(self, at: float) -> list[str]:
        return await source_prom.list_jobs(self.session, self.base_url, at, self.timeout_s)

    async def fetch_job(self, job_id: str, window: source_prom.Window) -> pd.DataFrame:
        return await source_prom.fetch_job(self.session, self.base_url, job_id, window, self.timeout_s)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        if not self.resume_lookback_s:
            return {}
        return await resume.resume(self.session, self.base_url, job_ids, at, self.resume_lookback_s, self.timeout_s)
