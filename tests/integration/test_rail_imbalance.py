"""End to end, all real: the simulator and its node agents (job 7002 on two nodes of four rails, rail 2 carrying
twice its usual bytes from 20 s), Prometheus with the generated rules and Alertmanager. The rail-imbalance
ticket names the rail and the job, and no other rail."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.alerts import config
from tests.helpers.alerting import ALERTS, Webhook, start_alerting, until

SCENARIO = ALERTS / "e2e-rail-imbalance.yaml"
SKEW = next(f for f in yaml.safe_load(SCENARIO.read_text())["faults"] if f["kind"] == "rail_skew")
JOB = "7002"

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.long(35)]


async def test_the_rail_imbalance_ticket_names_the_rail_and_the_job(aiohttp_server, stack, tmp_path: Path) -> None:
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    root = tmp_path / "sim"
    sim = await asyncio.to_thread(lc.start_sim, SCENARIO, root, stack)
    cluster = json.loads((root / "cluster.json").read_text())
    skew_start = cluster["start_timestamp"] + SKEW["start_s"] / cluster["speed"]
    agents = await asyncio.to_thread(lc.start_node_agents, root, stack)
    base = f"http://127.0.0.1:{server.port}"
    cfg = config.load(ALERTS / "e2e-rail-config.yaml")
    cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue"))
    prom, am = await start_alerting(cfg, agents, stack, tmp_path)
    services = (sim, prom, am, *agents.values())

    def before_the_skew():
        return [a for t, a in hook.alerts("FabricRailImbalance", "firing") if t < skew_start]
    tickets = await until(lambda: [a for _, a in hook.alerts("FabricRailImbalance", "firing")], skew_start + 60,
                          "the FabricRailImbalance ticket", services)
    assert before_the_skew() == []
    for ticket in tickets:
        labels = ticket["labels"]
        assert (labels["rail"], labels["job_id"], labels["severity"]) == (str(SKEW["rail"]), JOB, "ticket"), labels
        assert f"Rail {SKEW['rail']} carries" in ticket["annotations"]["summary"]
    receivers = {receiver for _, receiver, a in hook.received if a["labels"]["alertname"] == "FabricRailImbalance"}
    assert receivers == {"queue"}  # a ticket, never the pager
