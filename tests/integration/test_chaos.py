"""Chaos on real processes (tests/helpers/chaos.py), time-compressed: Prometheus SIGKILLed and restarted under
the analytics service, Alertmanager down while a page starts firing. The same scenarios at their real
durations, with figures: bench/bench_chaos.py."""
from __future__ import annotations

import dataclasses
import shutil

import pytest

from lockstep.stack import start_prometheus
from tests.helpers.analytics_service import PROM_CONFIG, assert_the_whole_run_accounted, service_config
from tests.helpers.chaos import PAGE_LABELS, alertmanager_outage, prometheus_outage

pytestmark = [pytest.mark.integration, pytest.mark.long(26)]


async def test_prometheus_killed_mid_run_serves_stale_then_catches_up_losing_no_gpu_second(
        service_datadir, service_sim, tmp_path, stack):
    """A refresh 2 min into the run; Prometheus SIGKILLed; refreshes 6 min in fail and the results of
    before are served, marked stale; Prometheus restarted on the same port and data; refreshes at the
    end catch up the gap chunk by chunk, and the loss account of the whole run matches the truth."""
    shutil.copytree(service_datadir / "data", tmp_path / "data")
    prom = stack.add(start_prometheus(PROM_CONFIG, tmp_path))
    port = int(prom.url.rsplit(":", 1)[1])
    start, end = service_sim.start, service_sim.start + service_sim.truth["duration_s"]
    config = dataclasses.replace(service_config(prom.url, service_sim), window_s=125)
    out = await prometheus_outage(prom, lambda: stack.add(start_prometheus(PROM_CONFIG, tmp_path, port)), config,
                                  "7300", (start + 120, start + 360, end), chunks=4)
    assert out.stale_served and out.same_results and out.failed_refreshes >= 2
    assert_the_whole_run_accounted(out.counters, service_sim, end)


async def test_a_page_fired_while_alertmanager_is_down_arrives_when_it_is_back(tmp_path):
    """Compressed: Prometheus resends firing alerts every second (default 1 m), Alertmanager waits 1 s
    before a page (generated default 10 s), and it is down 15 s (the bench: 5 min, the defaults)."""
    out = await alertmanager_outage(tmp_path, outage_s=15, resend_delay="1s", evaluation_interval="1s",
                                    routing={"pager_group_wait": "1s", "group_wait": "1s"}, deadline_s=60)
    assert out.errors_while_down > 0   # Prometheus tried, and failed, while it was down
    assert out.paged_at is not None and out.paged_at > out.back_at, "no page after Alertmanager came back"
    labels = out.page["labels"]
    assert {k: labels[k] for k in PAGE_LABELS} == PAGE_LABELS and labels["cluster"] == "chaos"
    assert out.page["startsAt"] and out.fired_at < out.back_at
