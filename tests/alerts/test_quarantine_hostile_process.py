"""The real ``lockstep alerts quarantine-receiver`` process given a notification in which one alert is
valid and others are not (a hostlist in the node label, no node label, labels that are not strings):
posted to it directly, and sent by a real Alertmanager grouping the alerts as it does in production.
The valid drain must happen, each bad alert is refused for its own reason in the answer and the log,
and the answer's status must make Alertmanager record the notification as delivered (a 4xx is not
retried, but the group is sent again, bad alert and all, at every group_interval; a 5xx is retried).
The receiver is held to the smallest memory limit the Helm chart gives a lockstep service."""
from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

import pytest

from lockstep.stack import free_port, http_get, start_alertmanager
from tests.helpers.process_bounds import Bounded, smallest_helm_memory_limit
from tests.helpers.quarantine import notification, xid

pytestmark = pytest.mark.integration

TOKEN = "quarantine-t0ken"
DEADLINE_S = 60.0   # for the receiver to start, or a notification to reach it through Alertmanager
GOOD, FORGED = xid("node03", "0", "79"), xid("node0[4-9]", "1", "79")


def fake_scontrol(tmp_path: Path) -> tuple[Path, Path]:
    """An ``scontrol`` recording its argv, one JSON line per call: (the executable, its log)."""
    log, script = tmp_path / "scontrol.log", tmp_path / "scontrol"
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    script.chmod(0o755)
    return script, log


def drained(log: Path) -> list[str]:
    return [json.loads(line)[1] for line in log.read_text().splitlines()] if log.exists() else []


def start_receiver(tmp_path: Path) -> tuple[Bounded, str, Path]:
    """The receiver executing drains (an inventory of node00..node19), on a free port: (process, URL,
    the fake scontrol's log). A port taken between the pick and the bind is picked again."""
    inventory = tmp_path / "nodes"
    inventory.write_text("".join(f"node{i:02d}\n" for i in range(20)))
    scontrol, log = fake_scontrol(tmp_path)
    env = dict(os.environ, LOCKSTEP_QUARANTINE_TOKEN=TOKEN)
    for attempt in range(3):
        port = free_port()
        proc = Bounded.lockstep(["alerts", "quarantine-receiver", "--execute", "--node-inventory", str(inventory),
                                 "--scontrol", str(scontrol), "--max-drains-per-hour", "10",
                                 "--max-drained-fraction", "0.5", "--web.listen-address", f"127.0.0.1:{port}"],
                                smallest_helm_memory_limit(), tmp_path / f"receiver{attempt}.log", env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            proc.until(lambda url=url: _healthy(url), DEADLINE_S, "the receiver healthy")
            return proc, url, log
        except AssertionError:
            proc.stop()
            if "address already in use" not in proc.log().lower():
                raise
    raise AssertionError("no free port for the receiver")


def _healthy(url: str) -> bool:
    try:
        return http_get(url + "/-/healthy", timeout=2)[0] == 200
    except OSError:
        return False


def post(url: str, payload: object, token: str = TOKEN) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST", headers={
        "Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_a_bad_alert_is_refused_alone_and_the_valid_drain_beside_it_happens(tmp_path):
    """Before: a notification with node03 and node0[4-9] was a 400 as a whole and node03 was not
    drained. Now node03 is drained, and each bad alert is named, with its reason, in the answer and
    the log; the answer is 200."""
    proc, url, log = start_receiver(tmp_path)
    try:
        status, body = post(url + "/alerts", notification(
            GOOD, FORGED, {"alertname": "GPUFellOffBus", "gpu": "2"},
            {"alertname": "GPUMissing", "node": "node05", "gpu": "x"}))
        payload = notification({"alertname": "GPUMissing", "node": "node06"})
        payload["alerts"].append({"status": "firing", "labels": {"alertname": "GPUMissing", "node": 6}})
        second_status, second = post(url + "/alerts", payload)
        proc.until(lambda: "alert=1" in proc.log(), DEADLINE_S, "the refused alerts logged")
    finally:
        proc.stop()
    assert status == 200, body
    assert [(a["node"], a["action"]) for a in body["actions"]] == [("node03", "drain"), ("node05", "drain")]
    assert [(r["alert"], r["alertname"]) for r in body["refused"]] == [(1, "GPUXidCritical"), (2, "GPUFellOffBus")]
    assert "'node0[4-9]' is not one node name" in body["refused"][0]["error"]
    assert body["refused"][1]["error"] == "has no node label"
    assert second_status == 200 and [(a["node"], a["action"]) for a in second["actions"]] == [("node06", "drain")]
    assert second["refused"] == [{"alert": 1, "alertname": "", "error": "labels must be a mapping of strings"}]
    assert drained(log) == ["NodeName=node03", "NodeName=node05", "NodeName=node06"]
    refused_lines = [line for line in proc.log().splitlines() if "action=refused" in line]
    assert len(refused_lines) == 3 and "alert=1" in refused_lines[0] and "node0[4-9]" in refused_lines[0]
    assert proc.returncode == 0 and proc.peak_bytes <= proc.limit


def test_alertmanager_delivers_a_group_with_a_forged_alert_once_and_the_valid_drain_happens(tmp_path):
    """A real Alertmanager groups a valid alert (node03) and a forged one (node0[4-9]) into one
    notification to the receiver. Before: the 400 made Alertmanager give the notification up as failed
    (node03 never drained) and send it again at every group_interval. Now it is delivered: node03 is
    drained, and Alertmanager counts the notification sent and none failed."""
    proc, url, log = start_receiver(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    config = {"route": {"receiver": "quarantine", "group_by": ["alertname"], "group_wait": "0s",
                        "group_interval": "1s", "repeat_interval": "1h"},
              "receivers": [{"name": "quarantine", "webhook_configs": [{
                  "url": url + "/alerts", "send_resolved": False,
                  "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(token_file)}}}]}]}
    am = start_alertmanager(config, tmp_path / "am")
    try:
        alerts = [{"labels": labels, "annotations": {}} for labels in (GOOD, FORGED)]
        request = urllib.request.Request(am.url + "/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

        def webhook_counters() -> tuple[float, float]:
            text = http_get(am.url + "/metrics")[1].decode()
            counts = {name: sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                if line.startswith(name + "{") and 'integration="webhook"' in line)
                      for name in ("alertmanager_notifications_total", "alertmanager_notifications_failed_total")}
            return counts["alertmanager_notifications_total"], counts["alertmanager_notifications_failed_total"]

        # the receiver logs the forged alert's refusal while it handles the delivery: wait for that line too
        proc.until(lambda: webhook_counters()[0] >= 1 and drained(log) != [] and "action=refused" in proc.log(),
                   DEADLINE_S, "Alertmanager's notification delivered, node03 drained and the forged alert refused")
        sent, failed = webhook_counters()
        assert failed == 0, am.log_tail()
        assert drained(log) == ["NodeName=node03"]
        assert "node0[4-9]" in next(line for line in proc.log().splitlines() if "action=refused" in line)
    finally:
        am.stop()
        proc.stop()
    assert proc.peak_bytes <= proc.limit
