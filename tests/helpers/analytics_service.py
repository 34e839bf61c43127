"""The analytics service's test run (tests/fixtures/analytics/service.yaml: 4 nodes x 8 GPUs for 600 s, a
checkpoint every 240 s, GPU node01/3 throttled from 300 s to the end), the service's config over it, and
the checks the service, chaos and auth tests share. The run itself and its TSDB blocks are the module
fixtures ``service_sim`` and ``service_datadir`` (tests/conftest.py)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.service.config import ServiceConfig, Shard
from lockstep.analytics.service.keys import REFRESHED
from tests.helpers.paths import FIXTURES

SCENARIO = FIXTURES / "analytics/service.yaml"
EVIL = 'x"} or vector(1) or lockstep_gpu_job_info{job_id="'
PROM_CONFIG = {"global": {"scrape_interval": "5s"}, "scrape_configs": []}


def backfill_with_evil_job(sim, workdir) -> None:
    """TSDB blocks of the scenario under ``workdir``, plus one job_info series on a node outside the job
    whose job_id is a PromQL injection attempt."""
    frame = sim.frame
    info = frame[(frame["metric"] == "lockstep_gpu_job_info") & (frame["node"] == "node00") & (frame["gpu"] == "0")]
    evil = info.astype({c: str for c in info.columns if c not in ("timestamp", "value")})
    evil = evil.assign(node="node04", job_id=EVIL)
    both = pd.concat([frame.astype({c: str for c in frame.columns if c not in ("timestamp", "value")}), evil],
                     ignore_index=True)
    localcluster.backfill(both, workdir, max_block_duration="24h")


def service_config(url: str, sim, **kw) -> ServiceConfig:
    """The service scoring the whole run in one window after it ended: each sample is booked at once
    (``book_after_s=0``; waiting for later samples is tested on its own, tests/analytics/service/test_settle.py)."""
    end = sim.start + sim.truth["duration_s"]
    return ServiceConfig(**{"prometheus_url": url, "interval_s": 0.3, "window_s": sim.truth["duration_s"] + sim.period,
                            "step_s": sim.period, "timeout_s": 5.0, "max_backoff_s": 0.6, "now": lambda: end,
                            "book_after_s": 0.0, **kw})


async def next_refresh(app) -> None:
    refreshed = app[REFRESHED]
    refreshed.clear()
    await asyncio.wait_for(refreshed.wait(), 30)


def assert_the_whole_run_accounted(counters, sim, end: float) -> None:
    """Loss counters up to ``end`` that match the truth of the whole run, as one window covering it."""
    truth = sim.truth["loss"]
    assert counters.accounted_until == end
    assert counters.allocated == pytest.approx(truth["allocated_gpu_seconds"])
    for cause, want in truth["lost_gpu_seconds"].items():
        assert abs(counters.lost[cause] - want) <= max(0.1 * want, 0.002 * truth["allocated_gpu_seconds"]), cause


@dataclass(frozen=True)
class Settings:
    """What ``Refresher`` reads of the service's config."""

    window_s: float
    step_s: float = 5.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1
    settle_s: float = 0.0
