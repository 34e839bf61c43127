"""Per-job I/O on the job dashboard through a real Prometheus, for a Slurm job and for the same job run as pods:
``lockstep sim run`` writes the job's cgroup v2 group (its Slurm job's, or its pod's) into its node's tree, a real
node agent (``--sim.node-root``) reads it with the job-io collector, Prometheus scrapes it every second, and the job
dashboard's panels show the job's own block I/O and its I/O pressure: the ranks waiting for input as the
scenario's capped file system makes them (fixture job-io.yaml)."""
from __future__ import annotations

import time

import pytest

from lockstep import localcluster
from lockstep.dashboards import check
from lockstep.dashboards.build import build_all
from lockstep.stack import start_prometheus
from tests.helpers.paths import FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.long(55)]

SCENARIO = FIXTURES / "dashboards" / "job-io.yaml"
# The panels' rates are judged over 15 s, not Grafana's 4 s at this 1 s scrape: the simulator writes a tick per
# wall second but catches up after falling behind under load, so a 4 s window can hold three ticks' counters or five,
# and a share of time read over it swung by a third (0.199 for 0.299 once under CI's load).
RATE_S = 15
VALUES = {"datasource": "prometheus", "job_id": "6161", "node": ".*", "instance": ".*", "rail": ".*",
          "__rate_interval": f"{RATE_S}s", "__interval": "1s", "__range": "20s", "__range_s": "20"}
WAITING = 1 - 1.5 / (4.0e9 / 1.87e9)     # the share of time the ranks wait for input (job-io.yaml)
PANELS = ("Job's own block I/O (its cgroup)", "Job's I/O pressure: share of time waiting on I/O (worst node)")


def _panels(url: str, job_id: str, start: float, end: float) -> dict[tuple[str, str], list]:
    return {(q.panel, q.ref): check.run(url, q, start, end, 1)
            for q in check.panel_queries({"job": build_all()["lockstep-job.json"]}, {**VALUES, "job_id": job_id})
            if q.panel in PANELS}


def _job_id(url: str) -> str:
    """The job as the node agent's job mapping names it (under Kubernetes: from its pod's operator labels)."""
    found = check.run(url, check.PanelQuery("-", "-", "-", "group by (job_id) (lockstep_gpu_job_info)", True), 0,
                      time.time(), 1)
    return found[0]["metric"]["job_id"] if found else ""


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes"])
def test_the_jobs_own_io_and_pressure_show_on_the_job_dashboard(tmp_path, stack, scheduler):
    root = tmp_path / "root"
    localcluster.start_sim(SCENARIO, root, stack, speed=1, extra_args=["--scheduler", scheduler])
    agents = localcluster.start_node_agents(root, stack)
    targets = {node: localcluster.host_port(a) for node, a in agents.items()}
    prom = stack.add(start_prometheus(localcluster.prometheus_config(targets, scrape_interval="1s"), tmp_path / "prom"))
    start = time.time()
    deadline, shown = start + 120, {}
    while time.time() < deadline:     # until every panel query's last point has a whole rate window of data
        job_id = _job_id(prom.url)
        shown = _panels(prom.url, job_id, start, time.time()) if job_id else {}
        # a point at each second once two scrapes are in its window: RATE_S + 2 of them put the first scrape
        # before the last point's window began
        if shown and all(any(len(s["values"]) >= RATE_S + 2 for s in result) for result in shown.values()):
            break
        time.sleep(0.5)
    assert len(shown) == 3 and all(shown.values()), shown
    assert (job_id == "6161") == (scheduler == "slurm")
    read, write = shown[(PANELS[0], "A")], shown[(PANELS[0], "B")]
    assert [s["metric"] for s in read] == [{"mount": "/scratch"}]    # the loaders' cache device, named by its mount
    assert float(read[0]["values"][-1][1]) > 0 and float(write[0]["values"][-1][1]) <= 0
    pressure = {s["metric"]["kind"]: float(s["values"][-1][1]) for s in shown[(PANELS[1], "A")]}
    assert set(pressure) == {"some", "full"}
    assert pressure["full"] == pytest.approx(WAITING, abs=0.08)
    assert pressure["some"] >= pressure["full"]
