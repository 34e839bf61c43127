"""Kubernetes job ids (``<namespace>/<name>``) in the analytics: accepted where Kubernetes' name rules
allow them, rejected when crafted, and, against a real Prometheus holding near-miss neighbours, a
query built for one id selects exactly that job's series."""
from __future__ import annotations

import pandas as pd
import pytest

from lockstep import localcluster
from lockstep.analytics.evaluation.emulate import frame_block
from lockstep.analytics.frame.inputs import MEMBER, MEMBER_ELSEWHERE, MEMBER_ON_NODES
from lockstep.analytics.prom import promql
from lockstep.analytics.prom.grid import Window
from lockstep.exporters.catalog import gpu
from lockstep.stack import Stack, query, start_prometheus

GOOD = ["ml-team/llama-pretrain", "default/bench", "ml-team/vllm-1", "ml-team/My_Run.v2", "a/b",
        "kube-system/" + "x" * 253, "n" * 63 + "/x"]
BAD = ['ml-team/llama"}', "ML-Team/x", "ns/", "/name", "a/b/c", "ns/name\n", "ns/na me", "-ns/x", "ns-/x",
       'ns/x"} or vector(1) #', "ns/.hidden", "n" * 64 + "/x", "ns/" + "x" * 254, "ns/x~", 'ns/x=~".*"',
       "ns/x,job_id=~'.+'", "ns/x\\", "ns/x}", "ns/x{y}"]
# Neighbours an unanchored or unescaped selector would also match.
NEIGHBOURS = ["ml-team/llama", "ml-team/llama-pretrain", "ml-team/llama-pretrain-2", "team/llama-pretrain",
              "ml-team/llama.pretrain"]
WIDE = "ml-team/wide"     # a job on three nodes


@pytest.mark.parametrize("good", GOOD)
def test_kubernetes_job_ids_are_accepted(good):
    assert promql.job_selector(good) == f'lockstep_gpu_job_info{{job="lockstep-node",job_id="{good}"}}'


@pytest.mark.parametrize("bad", BAD)
def test_crafted_namespace_or_name_is_rejected(bad):
    with pytest.raises(promql.InvalidJobId, match="<namespace>/<name>"):
        promql.job_selector(bad)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    start = 1_767_225_600.0   # 2026-01-01, inside start_prometheus' retention
    rows = [{"timestamp": start + 5 * i, "metric": gpu.JOB_INFO.name, "node": f"node{n:02d}", "value": 1.0,
             **{label: "0" for label in gpu.JOB_INFO.labels}, "job_id": job_id}
            for n, job_id in enumerate(NEIGHBOURS) for i in range(3)]
    rows += [{"timestamp": start + 5 * i, "metric": gpu.JOB_INFO.name, "node": f"wide{n}", "value": 1.0,
              **{label: "0" for label in gpu.JOB_INFO.labels}, "job_id": WIDE} for n in range(3) for i in range(3)]
    workdir = tmp_path_factory.mktemp("prom-ids")
    localcluster.backfill(pd.DataFrame(rows), workdir)
    with Stack() as stack:
        yield stack.add(start_prometheus({"scrape_configs": []}, workdir)), start + 10, pd.DataFrame(rows)


@pytest.mark.integration
def test_a_query_for_one_kubernetes_job_selects_it_and_no_neighbour(prometheus):
    service, at, _ = prometheus
    for job_id in NEIGHBOURS:
        found = query(service.url, promql.job_selector(job_id), at)
        assert [r["metric"]["job_id"] for r in found] == [job_id]
        members = query(service.url, MEMBER.promql(job_id, 5.0), at)      # the analytics' own query of the job
        assert {r["metric"]["node"] for r in members} == {f"node{NEIGHBOURS.index(job_id):02d}"}


@pytest.mark.integration
def test_a_jobs_gpus_asked_on_some_nodes_and_on_every_other_split_its_series(prometheus):
    """A window fetched whole asks for its GPUs on the nodes its ends name, then on every other node
    (``node!~``, ``lockstep.analytics.service.filling``): on a real Prometheus the two answers split the job's
    series between them, no neighbour's among them, and the emulated answers (the simulator's evaluation and
    the tests' sources) split them alike."""
    service, at, rows = prometheus
    named = ("wide0", "wide2")
    grid = Window(at - 10, at, 5.0)
    for inp, nodes in ((MEMBER_ON_NODES, {"wide0", "wide2"}), (MEMBER_ELSEWHERE, {"wide1"})):
        found = query(service.url, inp.promql(WIDE, 5.0, named), at)
        assert {(r["metric"]["job_id"], r["metric"]["node"]) for r in found} == {(WIDE, n) for n in nodes}
        emulated = frame_block({gpu.JOB_INFO.name: rows[rows["metric"] == gpu.JOB_INFO.name]}, inp, grid, WIDE, named)
        assert {labels["node"] for labels in emulated.labels} == nodes


async def test_the_job_api_takes_a_namespaced_id_with_its_slash_plain_or_encoded(aiohttp_client, refused_port):
    from lockstep.analytics.service.app import create_app
    from lockstep.analytics.service.config import ServiceConfig
    client = await aiohttp_client(create_app(ServiceConfig(prometheus_url=f"http://127.0.0.1:{refused_port}",
                                                           interval_s=60, timeout_s=1)))
    for path in ("ml-team/llama-pretrain", "ml-team%2Fllama-pretrain"):
        response = await client.get(f"/api/v1/jobs/{path}")
        body = await response.json()
        assert response.status == 404 and body["error"].startswith("job ml-team/llama-pretrain is not scored")
    response = await client.get("/api/v1/jobs/ml-team/x%22%7D%20or%20vector(1)")
    assert response.status == 400 and (await response.json())["errorType"] == "bad_data"
