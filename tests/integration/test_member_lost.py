"""End to end, all real, one shared stack: two simulated clusters (a job presented the Kubernetes way:
kubelet sockets and an API server; and a Slurm job), their node agents, one Prometheus with the generated
rules, one Alertmanager, one analytics service. The analytics flag the Kubernetes job's straggler; when
the job's pod on node02 is deleted mid-run TrainingJobMemberLost pages with the pod, and when a Slurm
job's node dies (its node agent killed) it pages with the node."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.alerts import alertmanager, build, config
from lockstep.stack import Stack, http_get, start_alertmanager, start_prometheus
from tests.helpers.alerting import ALERTS

KUBE, SLURM = ALERTS / "e2e-member-lost-kubernetes.yaml", ALERTS / "e2e-member-lost-slurm.yaml"
KUBE_JOB, SLURM_JOB = "ml-team/llama-pretrain", "7002"
SLURM_PREFIX = "slurm-"      # the Slurm cluster's nodes, as its targets are labelled in the shared Prometheus

pytestmark = [pytest.mark.integration, pytest.mark.long(125)]


def fault(path: Path, kind: str) -> dict:
    return next(f for f in yaml.safe_load(path.read_text())["faults"] if f["kind"] == kind)


class Webhook(BaseHTTPRequestHandler):
    received: list[tuple[float, str, dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for alert in body["alerts"]:
            self.received.append((time.time(), self.path.strip("/"), alert))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def firing(alertname: str, receiver: str = "pager") -> list[dict]:
    return [a for _, r, a in Webhook.received
            if r == receiver and a["status"] == "firing" and a["labels"]["alertname"] == alertname]


class Cluster:
    def __init__(self, tmp: Path, scenario: Path, stack: Stack, prefix: str = "", *extra: str) -> None:
        self.root = tmp / scenario.stem
        self.sim = lc.start_sim(scenario, self.root, stack, extra_args=extra)
        self.doc = json.loads((self.root / "cluster.json").read_text())
        self.agents = {prefix + node: agent for node, agent in lc.start_node_agents(self.root, stack).items()}

    def at(self, sim_s: float) -> float:
        """Wall time of simulated second ``sim_s``."""
        return self.doc["start_timestamp"] + sim_s / self.doc["speed"]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("member-lost")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with Stack() as stack:
        kube = Cluster(tmp, KUBE, stack, "", "--scheduler", "kubernetes")
        slurm = Cluster(tmp, SLURM, stack, SLURM_PREFIX)
        cfg = config.load(ALERTS / "e2e-config.yaml")
        cfg = replace(cfg, routing=replace(cfg.routing, pager_webhook_url=f"{base}/pager",
                                           queue_webhook_url=f"{base}/queue"),
                      # The service names a lost member once it has been gone MEMBER_GONE_SAMPLES samples; until
                      # then the stall's first samples carry the cause their signals show (the member's last,
                      # partial step reads as a straggler). Production waits 10m before paging a stall; the
                      # shared test config's 1s is shorter than that naming on a loaded machine.
                      for_={**cfg.for_, "TrainingJobStalled": "15s"})
        am = stack.add(start_alertmanager(alertmanager.render(cfg), tmp / "am"))
        build.write(cfg, tmp / "rules")
        targets = {node: lc.host_port(agent) for c in (kube, slurm) for node, agent in c.agents.items()}
        prom_config = lc.prometheus_config(targets, rule_files=[tmp / "rules" / build.RULES_FILE],
                                           alertmanager=lc.host_port(am), scrape_interval="1s")
        prom = stack.add(start_prometheus(prom_config, tmp / "prom"))
        analytics = lc.start_analytics(prom, prom_config, tmp / "analytics", stack,
                                       "--interval=1", "--window=60", "--step=1")
        # The Slurm node's agent dies with its node, whenever the tests before have taken to run (a test that
        # stopped it itself would stop it late if the Kubernetes test ran long, and the job would stall with
        # every agent still answering first).
        dies = fault(SLURM, "member_lost")
        death = threading.Timer(max(0.0, slurm.at(dies["start_s"]) - time.time()),
                                slurm.agents[f"{SLURM_PREFIX}node02"].stop)
        death.start()
        yield kube, slurm, analytics, stack.services
        death.cancel()
    server.shutdown()


def until(check, deadline: float, what: str, services=()):
    while not (result := check()):
        if time.time() > deadline:
            logs = "\n".join(f"--- {s.name}\n{s.log_tail(10)}" for s in services)
            pytest.fail(f"timed out waiting for {what}\n{logs[-6000:]}")
        time.sleep(0.5)
    return result


def job(analytics_url: str, job_id: str) -> dict | None:
    status, body = http_get(f"{analytics_url}/api/v1/jobs/{job_id}")
    return json.loads(body)["data"] if status == 200 else None


def test_kubernetes_job_straggler_flagged_then_a_deleted_pod_pages_as_member_lost(clusters):
    kube, _, analytics, services = clusters
    lost = fault(KUBE, "member_lost")
    # The straggler (node00 GPU 0), flagged before the member goes: the stalled job scores no straggler.
    flagged = until(lambda: (v := job(analytics.url, KUBE_JOB)) and v["stragglers"],
                    kube.at(lost["start_s"]), "the Kubernetes job's straggler flagged", services)
    assert [(s["node"], s["gpu"]) for s in flagged if s["gpu"] is not None] == [("node00", "0")]
    # The pod on node02 is deleted: the page names the job, the node and the pod.
    page = until(lambda: [a for a in firing("TrainingJobMemberLost") if a["labels"]["job_id"] == KUBE_JOB],
                 kube.at(lost["start_s"]) + 90, "the TrainingJobMemberLost page", services)[0]["labels"]
    assert (page["node"], page["severity"]) == ("node02", "page")
    assert page["pod"].startswith("llama-pretrain-node-0-2-")
    view = job(analytics.url, KUBE_JOB)
    assert view["stall"]["cause"] == "member_lost"
    assert [m["node"] for m in view["stall"]["evidence"]["missing"]] == ["node02"]
    # its cost is booked once the stall's samples settled (half the 60 s window here)
    until(lambda: (v := job(analytics.url, KUBE_JOB)) and v["loss"]["lost_gpu_seconds"]["member_lost"] > 0,
          time.time() + 60, "the stall's GPU-seconds booked as member_lost", services)
    # The lost member explains the stall: no second page for the same job.
    assert not [a for name in ("TrainingJobStalled", "TrainingJobHung") for a in firing(name)
                if a["labels"]["job_id"] == KUBE_JOB]


def test_slurm_job_whose_node_agent_dies_pages_as_member_lost(clusters):
    _, slurm, analytics, services = clusters
    dies = fault(SLURM, "member_lost")   # node02's agent is stopped then (the fixture's timer)
    page = until(lambda: [a for a in firing("TrainingJobMemberLost") if a["labels"]["job_id"] == SLURM_JOB],
                 max(time.time(), slurm.at(dies["start_s"])) + 90, "the TrainingJobMemberLost page",
                 services)[0]["labels"]
    assert page["node"] == f"{SLURM_PREFIX}node02" and "pod" not in page
    assert job(analytics.url, SLURM_JOB)["stall"]["cause"] == "member_lost"


def test_the_job_dashboard_shows_a_kubernetes_job_and_a_slurm_job(clusters):
    """The job variable's values come from lockstep_gpu_job_info for both schedulers, and every panel
    of the job dashboard runs for ``ml-team/llama-pretrain`` as for ``7002`` (a slash in the id is
    nothing special to PromQL); the per-GPU panels show each job's own GPUs."""
    from lockstep.dashboards import check
    from lockstep.dashboards.build import build_all
    kube, slurm, _, _ = clusters
    prom = next(s for s in clusters[3] if s.name == "prometheus")
    now = time.time()
    values = check._api(prom.url, "label/job_id/values", {}, "job_id values")
    assert {KUBE_JOB, SLURM_JOB} <= set(values)
    job_dashboard = {name: d for name, d in build_all().items() if d["uid"].endswith("job")}
    for job_id, nodes in ((KUBE_JOB, {"node00", "node01", "node02"}),
                          (SLURM_JOB, {f"{SLURM_PREFIX}node0{i}" for i in range(3)})):
        base = {"datasource": "prometheus", "job_id": job_id, "node": ".*", "instance": ".*", "rail": ".*",
                "__rate_interval": "4s", "__interval": "5s", "__range": "60s", "__range_s": "60"}
        seen: set[str] = set()
        for q in check.panel_queries(job_dashboard, base):
            for series in check.run(prom.url, q, min(kube.at(0), slurm.at(0)), now, 5):
                seen.add(series["metric"].get("node", ""))
        assert nodes <= seen, (job_id, sorted(seen))
