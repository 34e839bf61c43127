"""End to end, all real: two simulated clusters whose node agents read each node's simulated NCCL RAS service
(found through --sim.node-root), one Prometheus with the generated rules, one Alertmanager, one analytics
service. In job 8101 (6 GPUs: large here) a rank stops entering collectives: TrainingJobRankHung pages naming its
node, GPU and rank; in job 8102 (4 GPUs) a rank's process dies: a ticket names it. Neither job's stall pages as
stalled, and the named rank mutes the job's stalled and hung alerts in Alertmanager."""
from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import MappingProxyType

import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.alerts import alertmanager, build, config
from lockstep.stack import Stack, http_get, start_alertmanager, start_prometheus
from tests.helpers.alerting import ALERTS

STOPPED, DIED = ALERTS / "e2e-rank-stopped.yaml", ALERTS / "e2e-rank-died.yaml"
PREFIX = "b-"        # the second cluster's nodes, as its targets are labelled in the shared Prometheus
RAS = ("--collector.nccl-ras", "--nccl-ras.poll-interval=1", "--nccl-ras.timeout=0.8")

pytestmark = [pytest.mark.integration, pytest.mark.long(85)]


def fault(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["faults"][0]


class Webhook(BaseHTTPRequestHandler):
    received: list[tuple[str, dict, float]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.extend((self.path.strip("/"), alert, time.time()) for alert in body["alerts"])
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def firing(alertname: str, receiver: str) -> list[dict]:
    return [{**a, "received": at} for r, a, at in Webhook.received
            if r == receiver and a["status"] == "firing" and a["labels"]["alertname"] == alertname]


def until(check, deadline: float, what: str, services=()):
    while not (result := check()):
        if time.time() > deadline:
            logs = "\n".join(f"--- {s.name}\n{s.log_tail(10)}" for s in services)
            pytest.fail(f"timed out waiting for {what}\n{logs[-6000:]}")
        time.sleep(0.5)
    return result


class Cluster:
    def __init__(self, tmp: Path, scenario: Path, stack: Stack, prefix: str = "") -> None:
        self.root = tmp / scenario.stem
        lc.start_sim(scenario, self.root, stack)
        self.doc = json.loads((self.root / "cluster.json").read_text())
        self.agents = {prefix + node: agent for node, agent in lc.start_node_agents(self.root, stack,
                                                                                    extra_args=RAS).items()}

    def at(self, sim_s: float) -> float:
        return self.doc["start_timestamp"] + sim_s / self.doc["speed"]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rank-hung")
    Webhook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with Stack() as stack:
        stopped = Cluster(tmp, STOPPED, stack)
        died = Cluster(tmp, DIED, stack, PREFIX)
        cfg = config.load(ALERTS / "e2e-config.yaml")
        # a job of 5 GPUs or more pages here (job 8101 holds 6, job 8102 4); the alert holds 2 s
        cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{base}/pager",
                                           queue_webhook_url=f"{base}/queue"),
                      thresholds=replace(cfg.thresholds, rank_hung_page_gpus=5),
                      for_=MappingProxyType({**cfg.for_, "TrainingJobRankHung": "2s"}))
        am = stack.add(start_alertmanager(alertmanager.render(cfg), tmp / "am"))
        build.write(cfg, tmp / "rules")
        targets = {node: lc.host_port(agent) for c in (stopped, died) for node, agent in c.agents.items()}
        prom_config = lc.prometheus_config(targets, rule_files=[tmp / "rules" / build.RULES_FILE],
                                           alertmanager=lc.host_port(am), scrape_interval="1s")
        prom = stack.add(start_prometheus(prom_config, tmp / "prom"))
        analytics = lc.start_analytics(prom, prom_config, tmp / "analytics", stack,
                                       "--interval=1", "--window=60", "--step=1")
        yield stopped, died, analytics, stack.services, am
    server.shutdown()


def job(analytics_url: str, job_id: str) -> dict | None:
    status, body = http_get(f"{analytics_url}/api/v1/jobs/{job_id}")
    return json.loads(body)["data"] if status == 200 else None


def rank_hung(job_id: str, receiver: str) -> list[dict]:
    return [a for a in firing("TrainingJobRankHung", receiver) if a["labels"]["job_id"] == job_id]


def test_a_rank_that_stopped_pages_with_its_node_gpu_and_rank(clusters):
    stopped, _, analytics, services, _ = clusters
    hang = fault(STOPPED)
    alert = until(lambda: rank_hung("8101", "pager"), stopped.at(hang["start_s"]) + 120,
                  "the TrainingJobRankHung page of job 8101", services)[0]
    page = alert["labels"]
    assert (page["node"], page["gpu"], page["rank"], page["cause"], page["severity"]) == \
        ("node01", "1", "3", "rank_stopped", "page")
    # named within a minute of the hang, then held for: 2 s, then Alertmanager's group wait (1 s)
    assert alert["received"] - stopped.at(hang["start_s"]) < 60 + 2 + 1 + 5
    view = job(analytics.url, "8101")
    assert view["stall"]["cause"] == "rank_stopped"
    assert [(c["node"], c["gpu"], c["ras"]) for c in view["stall"]["evidence"]["culprits"]] == \
        [("node01", "1", "behind")]
    # its cost is booked once the hang's samples settled (half the 60 s window here)
    until(lambda: (v := job(analytics.url, "8101")) and v["loss"]["lost_gpu_seconds"]["rank_stopped"] > 0,
          time.time() + 60, "the hang's GPU-seconds booked as rank_stopped", services)


def test_a_rank_whose_process_died_opens_a_ticket_naming_it(clusters):
    _, died, analytics, services, _ = clusters
    hang = fault(DIED)
    ticket = until(lambda: rank_hung("8102", "queue"), died.at(hang["start_s"]) + 120,
                   "the TrainingJobRankHung ticket of job 8102", services)[0]["labels"]
    assert (ticket["node"], ticket["gpu"], ticket["rank"], ticket["cause"], ticket["severity"]) == \
        (f"{PREFIX}node01", "0", "2", "rank_dead", "ticket")
    assert job(analytics.url, "8102")["stall"]["cause"] == "rank_dead"
    assert not rank_hung("8102", "pager")


def test_the_named_rank_explains_the_stall_no_stalled_page_and_it_mutes_stalled_and_hung(clusters):
    """TrainingJobStalled leaves localised hangs to TrainingJobRankHung (its rule excludes their causes); a
    TrainingJobHung or TrainingJobStalled of the same job (a hang before RAS named the rank, say) is muted by it in
    the real Alertmanager."""
    _, _, _, services, am = clusters
    page = until(lambda: rank_hung("8101", "pager"), time.time() + 120, "the page of job 8101", services)[0]
    # (a sample of the hang's onset, scraped while some ranks still computed, may read as a straggler's stall)
    assert not [a for receiver in ("pager", "queue") for a in firing("TrainingJobStalled", receiver)
                if a["labels"]["job_id"] in ("8101", "8102") and a["labels"]["cause"] in ("rank_stopped", "rank_dead")]
    cluster = page["labels"]["cluster"]
    posted = [{"labels": {"alertname": name, "severity": "page", "job_id": "8101", "cluster": cluster,
                          **({"cause": "network"} if name == "TrainingJobStalled" else {})}}
              for name in ("TrainingJobHung", "TrainingJobStalled")]
    request = urllib.request.Request(f"{am.url}/api/v2/alerts", json.dumps(posted).encode(),
                                     {"Content-Type": "application/json"})
    assert urllib.request.urlopen(request, timeout=5).status == 200

    def muted() -> dict[str, set[str]] | None:
        state = json.loads(http_get(f"{am.url}/api/v2/alerts")[1])
        by_fp = {a["fingerprint"]: a["labels"]["alertname"] for a in state}
        got = {a["labels"]["alertname"]: {by_fp.get(fp, fp) for fp in a["status"]["inhibitedBy"]}
               for a in state if a["labels"].get("job_id") == "8101"
               and a["labels"]["alertname"] != "TrainingJobRankHung"}
        return got if len(got) == 2 and all(got.values()) else None
    got = until(muted, time.time() + 30, "the job's hung and stalled alerts muted")
    assert got["TrainingJobHung"] == {"TrainingJobRankHung"}
    assert got["TrainingJobStalled"] <= {"TrainingJobRankHung", "TrainingJobHung"}   # Alertmanager names one
