"""End to end, all real: the simulator, one node agent per node, Prometheus with the generated rules,
Alertmanager with the generated config. Three simulated nodes, one GPU fault each
(fixtures/alerts/e2e-gpu-health.yaml), each seen as the GPU's verdict in Prometheus and as the right
alert at the right receiver:

- node00 enumerates 1 of its 2 GPUs     → lockstep_node_gpus_visible 1 < expected 2 → GPUMissing (page)
- node01's GPU 1 counts 2 uncorrectable ECC errors → check ecc_uncorrectable 2, unhealthy
                   → GPUUncorrectableECC (ticket), and its XID 48 → GPUXidCritical (page, action reset_gpu)
- node02's GPU 0 has a row remap pending → check row_remap 1, still healthy → GPURowRemapPending (ticket),
                   and its XID 63 → GPUXidWarning (ticket, action none)

All three also reach the quarantine receiver's route, whose parser decides to drain each node.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import pytest

from lockstep import localcluster as lc
from lockstep.alerts import config
from lockstep.alerts.quarantine import parse_notification
from lockstep.stack import http_get
from tests.helpers.alerting import ALERTS, Webhook, start_alerting, until

pytestmark = pytest.mark.integration
SCENARIO = ALERTS / "e2e-gpu-health.yaml"
SPEED = 5.0   # the ECC error at 60 s simulated comes 12 s after the start: Prometheus scrapes it clean before


def value(url: str, expr: str) -> float | None:
    status, body = http_get(f"{url}/api/v1/query?{urlencode({'query': expr})}")
    assert status == 200, body[:200]
    result = json.loads(body)["data"]["result"]
    return float(result[0]["value"][1]) if len(result) == 1 else None


async def test_missing_gpu_uncorrectable_ecc_and_pending_remap_end_to_end(aiohttp_server, stack, tmp_path: Path):
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    base = f"http://127.0.0.1:{server.port}"
    root = tmp_path / "sim"
    sim = await asyncio.to_thread(lc.start_sim, SCENARIO, root, stack, SPEED)
    agents = await asyncio.to_thread(lc.start_node_agents, root, stack)   # each expects 2 GPUs (cluster.json)

    # Rules as in the pause-storm e2e (1 s evaluation, short group waits), GPUMissing without its 2 m hold.
    cfg = config.load(ALERTS / "e2e-config.yaml")
    cfg = replace(cfg, for_={**cfg.for_, "GPUMissing": "1s"}, routing=replace(
        cfg.routing, pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue",
        quarantine_webhook_url=f"{base}/quarantine"))
    prom, am = await start_alerting(cfg, agents, stack, tmp_path)
    services = (sim, prom, am, *agents.values())

    expected = {("GPUMissing", "pager", "node00", None), ("GPUUncorrectableECC", "queue", "node01", "1"),
                ("GPUXidCritical", "pager", "node01", "1"), ("GPURowRemapPending", "queue", "node02", "0"),
                ("GPUXidWarning", "queue", "node02", "0")}

    def notified():
        got = {(a["labels"]["alertname"], receiver, a["labels"]["node"], a["labels"].get("gpu"))
               for _, receiver, a in hook.received if a["status"] == "firing" and receiver != "quarantine"}
        return got if expected <= got else None
    got = await until(notified, time.time() + 90, "the GPU alerts", services)
    assert got == expected   # nothing else fired
    xid = next(a for _, r, a in hook.received if a["labels"]["alertname"] == "GPUXidCritical")
    assert (xid["labels"]["xid"], xid["labels"]["action"]) == ("48", "reset_gpu")
    missing = next(a for _, r, a in hook.received if a["labels"]["alertname"] == "GPUMissing")
    assert missing["labels"]["severity"] == "page" and missing["annotations"]["description"].startswith(
        "node00 shows 1 GPU(s) fewer")

    # The verdicts behind them.
    assert (value(prom.url, 'lockstep_node_gpus_visible{node="node00"}'),
            value(prom.url, 'lockstep_node_gpus_expected{node="node00"}')) == (1, 2)
    assert value(prom.url, 'lockstep_gpu_health{node="node01",gpu="1",check="ecc_uncorrectable"}') == 2
    assert value(prom.url, 'lockstep_gpu_healthy{node="node01",gpu="1"}') == 0
    assert value(prom.url, 'lockstep_gpu_health{node="node02",gpu="0",check="row_remap"}') == 1
    assert value(prom.url, 'lockstep_gpu_healthy{node="node02",gpu="0"}') == 1   # a warning: still healthy
    assert value(prom.url, 'count(lockstep_gpu_healthy == 0)') == 1

    # Alertmanager routed the same three to the quarantine receiver, whose decision is to drain each node.
    drained = {r.node for _, receiver, a in hook.received if receiver == "quarantine"
               for r in parse_notification(json.dumps({"alerts": [a]}).encode())}
    assert drained == {"node00", "node01", "node02"}
