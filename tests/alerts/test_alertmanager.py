"""alertmanager.yml: real amtool checks and route tests, and a real Alertmanager proving the
inhibitions, with an aiohttp webhook receiver and the real quarantine receiver behind it."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from lockstep.alerts import alertmanager, config
from lockstep.alerts.config import Routing
from lockstep.stack import free_port, require_binary, start_alertmanager, start_on_port
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

DEPLOY = REPO / "deploy" / "prometheus" / "alertmanager.yml"


def _amtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([require_binary("amtool"), *args], capture_output=True, text=True)


def test_committed_config_passes_amtool_check_config() -> None:
    result = _amtool("check-config", str(DEPLOY))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 inhibit rules" in result.stdout and "3 receivers" in result.stdout


@pytest.mark.parametrize("labels, receivers", [
    (["alertname=PFCPauseStorm", "severity=page", "cluster=a", "job_id=4242"], "pager"),
    (["alertname=TrainingJobStraggler", "severity=ticket", "job_id=4242"], "queue"),
    (["alertname=GPUFellOffBus", "severity=page", "node=node01"], "quarantine,pager"),
    (["alertname=GPUUncorrectableECC", "severity=ticket", "node=node01"], "quarantine,queue"),
    (["alertname=InfiniBandLinkDown", "severity=page", "node=node01"], "quarantine,pager"),
    (["alertname=LinkFailed", "severity=page", "node=node07", "device=mlx5_4"], "quarantine,pager"),
    # A switch-to-switch link names no host: nothing to drain.
    (["alertname=LinkFailed", "severity=page", "guid=0x00000000f0040000", "port=33"], "pager"),
    (["alertname=LinkDegraded", "severity=ticket", "node=node07", "device=mlx5_4"], "queue"),
    (["alertname=SomethingElse"], "queue"),
])
def test_amtool_routes(labels: list[str], receivers: str) -> None:
    result = _amtool("config", "routes", "test", f"--config.file={DEPLOY}", f"--verify.receivers={receivers}",
                     *labels)
    assert result.returncode == 0, result.stdout + result.stderr


class Webhook:
    """Records what Alertmanager's webhook_configs post, per receiver path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict]] = []
        self.app = web.Application()
        self.app.router.add_post("/{receiver}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        payload = await request.json()
        for alert in payload["alerts"]:
            self.received.append((request.match_info["receiver"], alert))
        return web.Response()

    def firing(self, receiver: str) -> set[tuple]:
        """(alertname, job_id, gpu or node) of the firing alerts notified to ``receiver``."""
        return {(a["labels"]["alertname"], a["labels"].get("job_id"), a["labels"].get("gpu", a["labels"].get("node")))
                for r, a in self.received if r == receiver and a["status"] == "firing"}


def _alert(ends: datetime | None = None, **labels: str) -> dict:
    alert = {"labels": {"cluster": "sim", **labels}, "annotations": {"summary": "test"}}
    if ends is not None:
        alert["endsAt"] = ends.isoformat()
    return alert


STORM = dict(alertname="PFCPauseStorm", severity="page", job_id="4242", node="node02", interface="ens1np0",
             priority="3", rail="1")
ALERTS = [
    STORM,
    dict(alertname="TrainingJobStraggler", severity="ticket", job_id="4242", node="node05", gpu="3"),
    dict(alertname="TrainingJobStraggler", severity="ticket", job_id="5151", node="node09", gpu="1"),
    dict(alertname="GPUFellOffBus", severity="page", node="node01", gpu="3", job_id="4242"),
    dict(alertname="GPUXidCritical", severity="page", node="node01", gpu="3", xid="79", job_id="4242"),
    # A double-bit ECC error on another node: drained for the XID's recovery action (the catalog's).
    dict(alertname="GPUXidCritical", severity="page", node="node06", gpu="2", xid="48", job_id="4242"),
    # node03's agent is down: its (stale) symbol-error ticket is muted, node04's is not.
    dict(alertname="ExporterDown", severity="ticket", job="lockstep-node", instance="node03:9840", node="node03"),
    dict(alertname="InfiniBandSymbolErrors", severity="ticket", node="node03", device="mlx5_0", port="1"),
    dict(alertname="InfiniBandSymbolErrors", severity="ticket", node="node04", device="mlx5_0", port="1"),
    # A Kubernetes job waits for the member its deleted pod was: page for the member, not for the hang.
    dict(alertname="TrainingJobMemberLost", severity="page", job_id="ml-team/llama-pretrain", node="node05",
         pod="llama-pretrain-node-0-5-x7k2p"),
    dict(alertname="TrainingJobHung", severity="page", job_id="ml-team/llama-pretrain"),
]


async def _wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for Alertmanager notifications"
        await asyncio.sleep(0.2)


def _fake_scontrol(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "scontrol.log"
    script = tmp_path / "bin" / "scontrol"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    script.chmod(0o755)
    return script, log


async def test_real_alertmanager_inhibits_and_routes_to_pager_queue_and_quarantine(aiohttp_server, stack,
                                                                                  tmp_path: Path) -> None:
    hook = Webhook()
    server = await aiohttp_server(hook.app)
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    scontrol, scontrol_log = _fake_scontrol(tmp_path)
    inventory = tmp_path / "nodes"
    # 20 nodes: the circuit breaker (at most 10 % of the fleet drained) lets both drains through.
    inventory.write_text("".join(f"node{i:02d}\n" for i in range(20)))
    quarantine = stack.add(await asyncio.to_thread(start_on_port, "quarantine", lambda port: [
        sys.executable, "-m", "lockstep", "alerts", "quarantine-receiver", f"--web.listen-address=127.0.0.1:{port}",
        f"--token-file={token}", "--execute", f"--scontrol={scontrol}", f"--node-inventory={inventory}"],
        tmp_path / "q", None, "/-/healthy"))
    base = f"http://127.0.0.1:{server.port}"
    cfg = config.AlertsConfig(routing=Routing(
        pager_webhook_url=f"{base}/pager", queue_webhook_url=f"{base}/queue",
        quarantine_webhook_url=f"{quarantine.url}/alerts", quarantine_bearer_token_file=str(token),
        group_wait="1s", pager_group_wait="1s", group_interval="1s", repeat_interval="1h"))
    am = stack.add(await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), tmp_path / "am"))

    async with aiohttp.ClientSession() as session:
        resp = await session.post(f"{am.url}/api/v2/alerts", json=[_alert(**a) for a in ALERTS])
        assert resp.status == 200, await resp.text()
        pages = {("PFCPauseStorm", "4242", "node02"), ("GPUFellOffBus", "4242", "3"), ("GPUXidCritical", "4242", "2"),
                 ("TrainingJobMemberLost", "ml-team/llama-pretrain", "node05")}
        tickets = {("TrainingJobStraggler", "5151", "1"), ("ExporterDown", None, "node03"),
                   ("InfiniBandSymbolErrors", None, "node04")}
        await _wait_for(lambda: hook.firing("pager") >= pages and hook.firing("queue") >= tickets)
        # Muted: the straggler of the storm's job, the XID of the GPU that fell off the bus, the
        # symbol errors of the node whose agent is down.
        assert ("TrainingJobStraggler", "4242", "3") not in hook.firing("queue")
        assert ("GPUXidCritical", "4242", "3") not in hook.firing("pager")
        assert ("InfiniBandSymbolErrors", None, "node03") not in hook.firing("queue")
        assert ("TrainingJobHung", "ml-team/llama-pretrain", None) not in hook.firing("pager")
        state = await (await session.get(f"{am.url}/api/v2/alerts")).json()
        by_key = {(a["labels"]["alertname"], a["labels"].get("gpu", a["labels"].get("node"))): a for a in state}

        def inhibitors(alertname: str, key: str) -> set[str]:
            status = by_key[(alertname, key)]["status"]
            assert status["state"] == ("suppressed" if status["inhibitedBy"] else "active")
            return {by_fp[fp] for fp in status["inhibitedBy"]}
        by_fp = {a["fingerprint"]: a["labels"]["alertname"] for a in state}
        assert inhibitors("TrainingJobStraggler", "3") == {"PFCPauseStorm"}
        assert inhibitors("GPUXidCritical", "3") == {"GPUFellOffBus"}
        assert inhibitors("InfiniBandSymbolErrors", "node03") == {"ExporterDown"}
        assert inhibitors("TrainingJobStraggler", "1") == set()
        assert inhibitors("InfiniBandSymbolErrors", "node04") == set()
        assert inhibitors("TrainingJobHung", None) == {"TrainingJobMemberLost"}
        assert inhibitors("TrainingJobMemberLost", "node05") == set()

        # The real quarantine receiver drained node01 (GPU fell off the bus; its XID 79 is muted) and
        # node06 (XID 48) exactly once each. Their notifications arrive in either order.
        await _wait_for(lambda: scontrol_log.exists() and len(scontrol_log.read_text().splitlines()) >= 2)
        drains = sorted(json.loads(line) for line in scontrol_log.read_text().splitlines())
        assert [d[:3] for d in drains] == [["update", "NodeName=node01", "State=DRAIN"],
                                           ["update", "NodeName=node06", "State=DRAIN"]]
        assert drains[0][3] == "Reason=lockstep GPUFellOffBus gpu=3"
        assert drains[1][3].startswith("Reason=lockstep GPUXidCritical gpu=2 xid=48")

        # Storm over: the straggler of job 4242 is no longer muted and reaches the queue.
        ended = datetime.now(timezone.utc) - timedelta(seconds=1)
        resp = await session.post(f"{am.url}/api/v2/alerts", json=[_alert(ended, **STORM)])
        assert resp.status == 200
        await _wait_for(lambda: ("TrainingJobStraggler", "4242", "3") in hook.firing("queue"))


async def test_node_less_exporter_down_mutes_no_other_jobs_collector_alerts(stack, tmp_path: Path) -> None:
    """Alertmanager's `equal` takes a label missing on both sides as equal: an ExporterDown without
    `node` (every node-agent target gone, signal=targets_gone) must not mute the power exporter's or the
    analytics service's own alerts, which carry no `node` either."""
    dead = f"http://127.0.0.1:{free_port()}"
    cfg = config.AlertsConfig(routing=Routing(pager_webhook_url=f"{dead}/pager", queue_webhook_url=f"{dead}/queue",
                                              quarantine_webhook_url=""))
    am = stack.add(await asyncio.to_thread(start_alertmanager, alertmanager.render(cfg), tmp_path / "am"))
    alerts = [dict(alertname="ExporterDown", severity="ticket", signal="targets_gone", job="lockstep-node"),
              dict(alertname="ExporterCollectorFailing", severity="ticket", job="lockstep-power",
                   instance="power:9841", collector="redfish"),
              # a node agent that is down still mutes its own node's alerts
              dict(alertname="ExporterDown", severity="ticket", job="lockstep-node", instance="node03:9840",
                   node="node03"),
              dict(alertname="ExporterCollectorFailing", severity="ticket", job="lockstep-node",
                   instance="node03:9840", node="node03", collector="gpu")]
    async with aiohttp.ClientSession() as session:
        resp = await session.post(f"{am.url}/api/v2/alerts", json=[_alert(**a) for a in alerts])
        assert resp.status == 200, await resp.text()
        # Alertmanager's inhibitor takes posted alerts in from a subscription, after the POST has
        # answered. It reads them in the order posted, so once node03's collector alert (posted after
        # both ExporterDown alerts) shows as muted, the node-less ExporterDown has been taken in too.
        muted: dict = {}
        deadline = time.monotonic() + 30
        while muted.get(("ExporterCollectorFailing", "lockstep-node")) != "suppressed":
            assert time.monotonic() < deadline, f"node03's collector alert never muted: {muted}"
            await asyncio.sleep(0.2)
            state = await (await session.get(f"{am.url}/api/v2/alerts")).json()
            muted = {(a["labels"]["alertname"], a["labels"]["job"]): a["status"]["state"] for a in state
                     if a["labels"]["alertname"] == "ExporterCollectorFailing"}
    assert muted == {("ExporterCollectorFailing", "lockstep-power"): "active",
                     ("ExporterCollectorFailing", "lockstep-node"): "suppressed"}
