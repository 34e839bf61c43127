"""End-to-end alerting in the tests: a webhook receiver recording what Alertmanager posts, a real
Alertmanager and a Prometheus evaluating the generated rules on node agents, and a wait that names what
it waited for with the services' log tails."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiohttp import web

from lockstep import localcluster as lc
from lockstep.alerts import alertmanager, build
from lockstep.stack import start_alertmanager, start_prometheus
from tests.helpers.paths import FIXTURES

ALERTS = FIXTURES / "alerts"


class Webhook:
    """What Alertmanager posts to the pager and queue receivers, with arrival times."""

    def __init__(self) -> None:
        self.received: list[tuple[float, str, dict]] = []
        self.app = web.Application()
        self.app.router.add_post("/{receiver}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        for alert in (await request.json())["alerts"]:
            self.received.append((time.time(), request.match_info["receiver"], alert))
        return web.Response()

    def alerts(self, alertname: str, status: str) -> list[tuple[float, dict]]:
        return [(t, a) for t, _, a in self.received
                if a["labels"]["alertname"] == alertname and a["status"] == status]


async def until(check, deadline: float, what: str, stack_services=()):
    while (result := check()) in (None, False, [], {}):
        if time.time() > deadline:
            logs = "\n".join(f"--- {s.name}\n{s.log_tail(15)}" for s in stack_services)
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        await asyncio.sleep(0.5)
    return result


async def start_alerting(cfg, agents: dict, stack, workdir: Path) -> tuple:
    """A real Alertmanager with ``cfg``'s routing, and a Prometheus evaluating ``cfg``'s rules on the node
    agents scraped every second and sending to it: (prometheus, alertmanager)."""
    am = stack.add(await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), workdir / "am"))
    build.write(cfg, workdir / "rules")
    prom_config = lc.prometheus_config({node: lc.host_port(a) for node, a in agents.items()},
                                       rule_files=[workdir / "rules" / build.RULES_FILE],
                                       alertmanager=lc.host_port(am), scrape_interval="1s")
    return stack.add(await asyncio.to_thread(start_prometheus, prom_config, workdir / "prom")), am
