"""Chaos scenarios on real processes, shared by tests/integration/test_chaos.py (time-compressed, asserting behaviour)
and bench/bench_chaos.py (the real durations, printing figures).

- ``prometheus_outage``: the analytics service reads a real Prometheus holding a simulated run
  (backfilled blocks); Prometheus is SIGKILLed mid-run and, after a while, restarted on the same port
  and data. What it shows: stale results served while it is gone, the refreshes that failed, and the
  loss account after the catch-up against the simulator's truth. The run's telemetry is already in the
  blocks: a pull-based Prometheus that is down also misses the scrapes of that time, which no consumer
  can recover; what is tested here is analytics across the outage of its source.
- ``alertmanager_outage``: Prometheus with the generated Alertmanager config and one page-severity rule
  that starts firing while Alertmanager is down; Alertmanager comes back on the same port and storage
  after ``outage_s``. What it shows: when the page reaches the pager webhook, against the return.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from aiohttp import web

from lockstep.alerts import alertmanager
from lockstep.alerts import config as alerts_config
from lockstep.analytics.service.app import create_app
from lockstep.analytics.service.config import ServiceConfig
from lockstep.analytics.service.keys import REFRESHED, STATE
from lockstep.stack import Service, http_get, reload_prometheus, start_alertmanager, start_prometheus

PAGE_LABELS = {"severity": "page", "node": "node01", "interface": "ens1np0", "priority": "3"}


async def refreshed(app: web.Application, timeout: float = 60) -> None:
    app[REFRESHED].clear()
    await asyncio.wait_for(app[REFRESHED].wait(), timeout)


@dataclass
class PrometheusOutage:
    stale_served: bool = False          # /api/v1/jobs said stale while Prometheus was gone
    same_results: bool = False          # ... and served the results of before
    failed_refreshes: int = 0
    refreshes_to_catch_up: int = 0
    counters: object = None             # the job's LossCounters at the end


async def prometheus_outage(prom: Service, restart, config: ServiceConfig, job: str, times: tuple[float, float, float],
                            chunks: int) -> PrometheusOutage:
    """``times``: (first refresh, refresh while Prometheus is gone, end of the run) on the injected clock;
    ``restart()`` starts Prometheus again (same port, same data); ``chunks`` bounds the catch-up."""
    clock = [times[0]]
    app = create_app(dataclasses.replace(config, now=lambda: clock[0]))
    runner = web.AppRunner(app)
    await runner.setup()   # runs the refresh loop; the app's JSON read through its state, as /api/v1/jobs does
    out = PrometheusOutage()
    try:
        await refreshed(app)
        before = app[STATE].results.jobs[job]
        prom.proc.kill()   # SIGKILL: no shutdown, no last word
        prom.proc.wait(10)
        clock[0] = times[1]
        failures = app[STATE].health.failures
        while app[STATE].health.failures < failures + 2:
            await refreshed(app)
        health = app[STATE].health
        out.stale_served, out.same_results = health.stale and not health.up, app[STATE].results.jobs[job] == before
        out.failed_refreshes = health.failures - failures
        await asyncio.to_thread(restart)
        clock[0] = times[2]
        for out.refreshes_to_catch_up in range(1, chunks + 2):
            await refreshed(app)
            counters = app[STATE].losses.get(job)
            if app[STATE].health.up and counters is not None and counters.accounted_until == times[2]:
                break
        out.counters = app[STATE].losses.get(job)
    finally:
        await runner.cleanup()
    return out


@dataclass
class AlertmanagerOutage:
    fired_at: float = 0.0               # the rule's alert became active (Prometheus' activeAt)
    down_at: float = 0.0
    back_at: float = 0.0
    paged_at: float | None = None
    errors_while_down: float = 0.0      # prometheus_notifications_errors_total during the outage
    page: dict | None = None


def _webhook(received: list) -> web.Application:
    async def hook(request: web.Request) -> web.Response:
        received.extend((time.time(), a) for a in (await request.json())["alerts"])
        return web.Response()

    app = web.Application()
    app.router.add_post("/{receiver}", hook)
    return app


def _rules(path: Path, fires: bool) -> Path:
    labels = "".join(f'\n          {k}: "{v}"' for k, v in PAGE_LABELS.items())
    path.write_text(f"groups:\n  - name: chaos\n    rules:\n      - alert: PFCPauseStorm\n"
                    f"        expr: vector(1) > {0 if fires else 1}\n        labels:{labels}\n")
    return path


def _metric(url: str, name: str) -> float:
    body = http_get(url + "/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(name))


async def alertmanager_outage(work: Path, outage_s: float, resend_delay: str, routing: dict,
                              evaluation_interval: str, deadline_s: float) -> AlertmanagerOutage:
    received: list = []
    runner = web.AppRunner(_webhook(received))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    hook = f"http://127.0.0.1:{runner.addresses[0][1]}"
    cfg = alerts_config.AlertsConfig()
    cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{hook}/pager",
                                       queue_webhook_url=f"{hook}/queue", **routing))
    out, services = AlertmanagerOutage(), []
    try:
        am = await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), work / "am")
        services.append(am)
        port = int(am.url.rsplit(":", 1)[1])
        prom_config = {"global": {"evaluation_interval": evaluation_interval, "external_labels": {"cluster": "chaos"}},
                       "rule_files": [str(_rules(work / "rules.yml", False))],
                       "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]}}
        prom = await asyncio.to_thread(start_prometheus, prom_config, work / "prom",
                                       extra_args=[f"--rules.alert.resend-delay={resend_delay}"])
        services.append(prom)
        am.stop()
        out.down_at = time.time()
        errors = _metric(prom.url, "prometheus_notifications_errors_total")
        _rules(work / "rules.yml", True)   # the condition begins while Alertmanager is down
        reload_prometheus(prom)
        while not (alerts := _firing(prom.url)):
            assert time.time() < out.down_at + 60, "the rule never fired"
            await asyncio.sleep(0.5)
        out.fired_at = alerts[0]
        await asyncio.sleep(max(0.0, out.down_at + outage_s - time.time()))
        out.errors_while_down = _metric(prom.url, "prometheus_notifications_errors_total") - errors
        assert not received, "a page arrived while Alertmanager was down"
        am = await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), work / "am", port)
        services.append(am)
        out.back_at = time.time()
        while not (pages := [(t, a) for t, a in received if a["labels"].get("alertname") == "PFCPauseStorm"]):
            if time.time() > out.back_at + deadline_s:
                return out
            await asyncio.sleep(0.2)
        out.paged_at, out.page = pages[0]
    finally:
        for service in reversed(services):
            service.stop()
        await runner.cleanup()
    return out


def _firing(prom_url: str) -> list[float]:
    """When each firing alert became active (Prometheus gives RFC 3339 with nanoseconds)."""
    body = json.loads(http_get(prom_url + "/api/v1/alerts")[1])
    return [datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", a["activeAt"]).replace("Z", "+00:00")).timestamp()
            for a in body["data"]["alerts"] if a["state"] == "firing"]
