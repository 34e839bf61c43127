"""The demo's pager speaks Alertmanager's webhook protocol; its port check names the flag to change; its
finding watcher prints what the analytics service newly reports."""
from __future__ import annotations

import json
import re
import socket
import threading
import urllib.request
from argparse import ArgumentParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

from lockstep import demo_config
from lockstep.demo_pager import Pager
from lockstep.demo_watch import FindingWatcher

# Alertmanager 0.25 webhook body (version 4), trimmed to the fields the pager reads.
PAYLOAD = {"version": "4", "status": "firing", "receiver": "pager", "groupKey": "{}:{}",
           "alerts": [{"status": "firing", "fingerprint": "a1b2", "startsAt": "2026-11-21T22:00:00Z",
                       "labels": {"alertname": "PFCPauseStorm", "severity": "page", "node": "node02",
                                  "interface": "ens41np0", "priority": "3"},
                       "annotations": {"summary": "PFC pause storm on node02 ens41np0 priority 3"}}]}


def post(url: str, body: dict) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status


def test_pager_prints_each_alert_once_and_logs_every_notification(tmp_path):
    out = StringIO()
    pager = Pager(0, tmp_path / "pages.jsonl", out)
    try:
        assert post(pager.url + "/pager", PAYLOAD) == 200
        assert post(pager.url + "/pager", PAYLOAD) == 200  # group re-sent: same alert, same state
        resolved = json.loads(json.dumps(PAYLOAD))
        resolved["alerts"][0]["status"] = "resolved"
        assert post(pager.url + "/pager", resolved) == 200
    finally:
        pager.stop()
    lines = out.getvalue().splitlines()
    assert lines == ["  >> PAGE     PFCPauseStorm [page] node=node02 interface=ens41np0 "
                     "PFC pause storm on node02 ens41np0 priority 3",
                     "  >> RESOLVED PFCPauseStorm [page] node=node02 interface=ens41np0 "
                     "PFC pause storm on node02 ens41np0 priority 3"]
    logged = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert len(logged) == 3 and logged[0] == {"receiver": "pager", "payload": PAYLOAD}


def test_check_ports_names_each_busy_port_and_its_flag(tmp_path):
    parser = ArgumentParser()
    demo_config.add_flags(parser)
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        pa, pb = a.getsockname()[1], b.getsockname()[1]
        args = parser.parse_args([f"--workdir={tmp_path}", "--prometheus-port=0", "--alertmanager-port=0",
                                  "--power-port=0", "--storage-port=0", "--analytics-port=0", "--pager-port=0",
                                  "--redfish-port=0", "--no-grafana", f"--analytics-port={pa}", f"--base-port={pb - 1}"])
        problems = demo_config.check_ports(demo_config.config_from_args(args), node_count=16)
    assert problems[0] == f"port {pa} for the analytics is already in use: pass --analytics-port=N (or 0 for any free port)"
    # Other processes on the machine may hold more ports of the range; the one held here must be named.
    overlap = re.fullmatch(rf"node exporter ports {pb - 1}-{pb + 14} overlap ports in use \(([\d, ]+)\): "
                           r"pass --base-port=N \(or 0\)", problems[1])
    assert overlap and str(pb) in overlap.group(1).split(", ")
    assert len(problems) == 2


def _jobs_row(stalled: bool) -> dict:
    """A row of the analytics service's ``GET /api/v1/jobs`` (analytics.routes)."""
    return {"job_id": "4242", "time": 1767226200.0, "stalled": stalled, "cause": "storage" if stalled else None,
            "stragglers": [{"node": "node05", "gpu": "3", "score": 0.71, "flagged": True},
                           {"node": "node05", "gpu": None, "score": 0.93, "flagged": True}],
            "goodput_ratio": 0.8712}


def test_finding_watcher_prints_each_straggler_once_and_each_stall_as_it_begins():
    answers = [_jobs_row(False), _jobs_row(True), _jobs_row(True), _jobs_row(False), _jobs_row(True)]

    class Jobs(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "success", "stale": False, "updated": 1767226201.0, "up": True,
                               "last_error": None, "data": [answers.pop(0)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Jobs)
    # a short poll: shutdown() waits for the serving loop to look (half a second by default)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        watcher = FindingWatcher(f"http://127.0.0.1:{server.server_address[1]}")
        polls = [watcher.poll() for _ in range(5)]
    finally:
        server.shutdown()
        server.server_close()
    assert polls == [["ANALYTICS straggler job 4242: node05 gpu 3 (score 0.71)",
                      "ANALYTICS straggler job 4242: node05 (score 0.93)"],
                     ["ANALYTICS job 4242 stalled: storage"], [], [], ["ANALYTICS job 4242 stalled: storage"]]
