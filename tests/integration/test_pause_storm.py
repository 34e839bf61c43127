"""End to end, all real: the simulator, one node agent per node, the analytics service, Prometheus
with the generated rules and Alertmanager with the generated config. A pause storm must page within
90 s of its start with interface and priority, mute the same job's straggler/stall alerts while it
fires, and resolve when the storm ends."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.alerts import alertmanager, build, config
from lockstep.stack import http_get, start_alertmanager, start_prometheus
from tests.helpers.alerting import ALERTS, Webhook, until

SCENARIO = ALERTS / "e2e-pause-storm.yaml"
STORM = next(f for f in yaml.safe_load(SCENARIO.read_text())["faults"] if f["kind"] == "pause_storm")
STORM_NODE, STORM_RAIL, JOB = STORM["node"], STORM["nic"], "7001"
PAGE_WITHIN_S = 90.0
JOB_ALERTS = ("TrainingJobStraggler", "TrainingJobStalled")

pytestmark = [pytest.mark.integration, pytest.mark.long(90)]


async def test_pause_storm_pages_with_interface_and_priority_mutes_the_job_and_resolves(
        aiohttp_server, stack, tmp_path: Path) -> None:
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    root = tmp_path / "sim"
    sim = await asyncio.to_thread(lc.start_sim, SCENARIO, root, stack)
    cluster = json.loads((root / "cluster.json").read_text())
    storm_start = cluster["start_timestamp"] + STORM["start_s"] / cluster["speed"]
    storm_node = next(n for n in cluster["nodes"] if n["name"] == STORM_NODE)
    storm_interface = storm_node["gpus"][STORM_RAIL]["interface"]
    agents = await asyncio.to_thread(lc.start_node_agents, root, stack)

    base = f"http://127.0.0.1:{server.port}"
    cfg = config.load(ALERTS / "e2e-config.yaml")
    cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{base}/pager",
                                       queue_webhook_url=f"{base}/queue"))
    am = stack.add(await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), tmp_path / "am"))
    rules_dir = tmp_path / "rules"
    build.write(cfg, rules_dir)
    prom_config = lc.prometheus_config(
        {node: lc.host_port(agent) for node, agent in agents.items()}, rule_files=[rules_dir / build.RULES_FILE],
        alertmanager=lc.host_port(am), scrape_interval="1s")
    prom = stack.add(await asyncio.to_thread(start_prometheus, prom_config, tmp_path / "prom"))
    analytics = await asyncio.to_thread(lc.start_analytics, prom, prom_config, tmp_path / "analytics", stack,
                                        "--interval=1", "--window=60", "--step=1")
    services = (sim, prom, am, analytics, *agents.values())

    # 1. The page: PFCPauseStorm reaches the pager within 90 s of the storm's start, naming the
    #    interface and priority (and the job on the node, the inhibition's key).
    def storm_page():
        return [(t, a) for t, a in hook.alerts("PFCPauseStorm", "firing")
                if a["labels"].get("signal") == "paused_time"]
    paged_at, page = (await until(storm_page, storm_start + PAGE_WITHIN_S, "the PFCPauseStorm page", services))[0]
    assert paged_at - storm_start < PAGE_WITHIN_S
    labels = page["labels"]
    assert (labels["node"], labels["interface"], labels["priority"]) == (STORM_NODE, storm_interface, "3")
    assert (labels["job_id"], labels["rail"], labels["cluster"]) == (JOB, str(STORM_RAIL), "sim")
    assert labels["severity"] == "page"

    # 2. The job's straggler alert (flagged before the storm, held through the stall) and its network
    #    stall are held by Alertmanager as suppressed by the storm, and not notified while it fires.
    storm_end = cluster["start_timestamp"] + STORM["end_s"] / cluster["speed"]

    def job_alerts_suppressed():
        current = json.loads(_get(f"{am.url}/api/v2/alerts"))
        storms = {a["fingerprint"] for a in current if a["labels"]["alertname"] == "PFCPauseStorm"
                  and a["status"]["state"] == "active"}
        muted = [a for a in current if a["labels"]["alertname"] in JOB_ALERTS]
        present = {a["labels"]["alertname"] for a in muted if a["labels"].get("job_id") == JOB}
        return (storms, muted) if storms and present == set(JOB_ALERTS) else None
    # Deadline past the storm's end: its alert outlives it by the rate window, and the check itself
    # requires the storm alert to be active.
    storms, muted = await until(job_alerts_suppressed, storm_end + 15,
                                 "the job's straggler and stall alerts during the storm", services)
    checked_at = time.time()
    for alert in muted:
        assert alert["labels"]["job_id"] == JOB
        inhibited_by = set(alert["status"]["inhibitedBy"])
        assert alert["status"]["state"] == "suppressed" and inhibited_by and inhibited_by <= storms, alert
    assert not [a for name in JOB_ALERTS for t, a in hook.alerts(name, "firing")
                if a["labels"].get("job_id") == JOB and paged_at <= t <= checked_at]

    # 3. Storm over: the page resolves.
    resolved = await until(lambda: [a for t, a in hook.alerts("PFCPauseStorm", "resolved")
                                     if a["labels"].get("signal") == "paused_time"],
                            storm_end + 60, "PFCPauseStorm to resolve", services)
    assert (resolved[0]["labels"]["interface"], resolved[0]["labels"]["priority"]) == (storm_interface, "3")


def _get(url: str) -> bytes:
    status, body = http_get(url)
    assert status == 200, body[:200]
    return body
