"""The simulator's Kubernetes presentation: the pods it makes of a scenario's job name the job and rank
the node agent's identity rules find (JobSet labels, tests/fixtures/kubernetes/README.md), a lost
member's pod is gone while the fault lasts, and ``lockstep demo --scheduler kubernetes`` names its job
the Kubernetes way."""
from __future__ import annotations

from argparse import ArgumentParser

import yaml

from lockstep import demo_config
from lockstep.demo_stack import demo_scenario
from lockstep.exporters.kube.identity import job_identity, pod_meta
from lockstep.simulator.kube import job_pods
from lockstep.simulator.kubepods import pod_json
from lockstep.simulator.scenario import load_scenario
from lockstep.simulator.topology import Topology
from tests.helpers.paths import REPO


def test_the_jobs_pods_carry_the_job_and_the_rank_and_a_lost_member_has_none():
    topo = Topology(load_scenario(REPO / "simulator/scenarios/member-lost.yaml"))   # node02 lost 150-250 s
    before, during = job_pods(topo, 100.0), job_pods(topo, 200.0)
    ids = [job_identity(pod_meta(pod_json(p, "1"))) for p in before]
    assert {(i.job_id, i.rank) for i in ids} == {("ml-team/llama-pretrain", str(r)) for r in range(4)}
    assert [p.node for p in before] == ["node00", "node01", "node02", "node03"]
    assert [p.node for p in during] == ["node00", "node01", "node03"]
    assert all(p.namespace == "ml-team" and len(p.containers[0].device_ids) == 8 for p in before)
    assert job_pods(topo, 260.0) == before     # the operator recreated it: the same pod


def test_the_demo_presented_the_kubernetes_way_names_its_job_namespace_slash_name(tmp_path):
    parser = ArgumentParser()
    demo_config.add_flags(parser)
    config = demo_config.config_from_args(parser.parse_args(["--workdir", str(tmp_path), "--scheduler", "kubernetes",
                                                             "--nodes", "2"]))
    doc = yaml.safe_load(demo_scenario(config).read_text())
    assert doc["job"]["job_id"] == demo_config.KUBE_JOB_ID == "ml-team/llama-pretrain"
    assert doc["cluster"]["nodes"] == 2
    slurm = demo_config.config_from_args(parser.parse_args(["--workdir", str(tmp_path)]))
    assert demo_scenario(slurm) == demo_config.SCENARIO
