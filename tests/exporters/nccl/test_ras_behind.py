"""How far a rank is behind its communicator within one RAS answer, and the addresses RAS knows this node by:
what names a hung rank wherever it runs, whichever node's answer is older (the collector against the
simulated RAS service over real TCP, JSON and text)."""
from __future__ import annotations

import re
import time

import pytest

from lockstep.exporters import registry
from lockstep.exporters.catalog import nccl as m
from lockstep.exporters.nccl.ras import parse
from lockstep.exporters.toolkit.exposition import Encoder
from lockstep.exporters.toolkit.exposition import render_text as exposition
from lockstep.simulator.ncclras import RasJob, RasService, render_json, render_text
from tests.helpers.exporter_args import exporter_config

NODE = "--nccl-ras.node-address=10.0.0.2"


def make_job(**kwargs) -> RasJob:
    job = RasJob(["10.0.0.1", "10.0.0.2"], gpus_per_node=4, **kwargs)
    job.advance(10)
    return job


@pytest.fixture
def collectors():
    """``start(*flags)``: the collector as the agent builds it from its flags, its first poll done."""
    made = []

    def start(*flags: str):
        config = exporter_config("--collector.disable-defaults", "--collector.nccl-ras", "--jobs.source=slurm",
                                 "--nccl-ras.poll-interval=3600", *flags)
        collector = registry.load()["nccl-ras"].factory(config)
        made.append(collector)
        deadline = time.monotonic() + 20
        while not collector.poller.state.result and time.monotonic() < deadline:
            time.sleep(0.02)
        return collector

    yield start
    for collector in made:
        collector.close()


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return exposition(families)


def series(text: str, name: str) -> list[dict]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]), value=float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines() if line.startswith(name + "{")]


def behind(text: str) -> dict[tuple[str, str], float]:
    """(comm rank, gpu) → behind, for the world communicator (the one with 8 ranks)."""
    world = {s["comm"] for s in series(text, m.COMMUNICATOR_RANKS.name) if s["value"] == 8}
    return {(s["rank"], s["gpu"]): s["value"] for s in series(text, m.RANK_BEHIND.name) if s["comm"] in world}


@pytest.mark.parametrize("version", ["2.30.7", "2.26.2"])
def test_a_rank_that_stopped_is_behind_its_peers_in_the_same_answer(collectors, version):
    """JSON gives every rank's counts; text only the ranks it singles out, with the group in front."""
    job = make_job(lead=1)
    job.stop_entering(5)            # node 10.0.0.2, GPU 1
    job.advance(3)                  # the others go one step further, then wait for it
    with RasService(job, version) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", NODE))
    got = behind(text)
    assert got[("5", "1")] == job.allreduce_per_step        # one step of AllReduce behind
    if version == "2.30.7":
        assert {k: v for k, v in got.items() if k != ("5", "1")} == {(str(r), str(r - 4)): 0.0 for r in (4, 6, 7)}
    else:
        assert set(got) == {("5", "1")}


def test_a_healthy_answer_has_every_rank_level(collectors):
    job = make_job()
    with RasService(job) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", NODE))
    values = [s["value"] for s in series(text, m.RANK_BEHIND.name)]
    assert len(values) == 8 and set(values) == {0.0}      # 4 ranks here, each in the world and its node's
    assert [s["address"] for s in series(text, m.RAS_NODE_ADDRESS.name)] == ["10.0.0.2"]


def test_the_node_address_is_known_from_a_local_rank_that_is_missing(collectors):
    """A rank of this node whose process died is named by its address: the address info joins it here."""
    job = make_job()
    job.declare_dead(6)             # node 10.0.0.2, GPU 2
    with RasService(job) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", NODE))
    assert [s["address"] for s in series(text, m.RAS_NODE_ADDRESS.name)] == ["10.0.0.2"]
    dead = [s for s in series(text, m.MISSING_RANK_INFO.name) if s["reason"] == "dead"]
    assert {(s["address"], s["gpu"]) for s in dead} == {("10.0.0.2", "2")}
    assert not [s for s in series(text, m.RANK_BEHIND.name) if s["gpu"] == "2"]    # no counts: absent, not 0


def test_the_furthest_count_of_a_communicator_is_parsed_from_either_format():
    job = RasJob(["10.0.0.1", "10.0.0.2"], gpus_per_node=4, seed=3)
    job.advance(20)
    job.stop_entering(2)
    job.advance(2)
    for status in (parse(render_json(job), "json"), parse(render_text(job, verbose=True), "text")):
        world = next(c for c in status.communicators if c.size == 8)
        assert dict(world.furthest)["AllReduce"] == 4 * 21
