"""The node agent's ``nccl-ras`` collector against the simulated RAS service over real TCP: the series of a
node's ranks, a rank that stopped entering collectives, a rank gone on another node, no job, a silent
listener that never delays a scrape, the communicator cap, and the job of each rank."""
from __future__ import annotations

import re
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from lockstep import stack as stack_mod
from lockstep.exporters import registry
from lockstep.exporters.catalog import nccl as m
from lockstep.exporters.collectors.nccl_ras import NcclRasCollector, NcclRasOptions, RasPoller
from lockstep.exporters.nccl.rasclient import RasAnswer, RasTimeout
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.simulator.ncclras import RasJob, RasService, render_json
from tests.helpers.exporter_args import exporter_config

NODES = ["10.0.0.1", "10.0.0.2"]
VOLATILE = re.compile(r"^lockstep_nccl_ras_(answer_age|poll_duration)_seconds .*\n", re.M)


def make_job(**kwargs) -> RasJob:
    job = RasJob(NODES, gpus_per_node=4, **kwargs)
    job.advance(10)
    return job


def jobs_dir(tmp_path: Path, gpus=range(4), job_id="4242") -> Path:
    d = tmp_path / "gpu-jobs"
    d.mkdir(exist_ok=True)
    for gpu in gpus:
        (d / str(gpu)).write_text(f"{job_id}\n")
    return d


@pytest.fixture
def collectors():
    """``start(*flags)``: the collector as the agent builds it from its flags; its first poll done."""
    made: list[NcclRasCollector] = []

    def start(*flags: str, first: bool = True) -> NcclRasCollector:
        config = exporter_config("--collector.disable-defaults", "--collector.nccl-ras", "--jobs.source=slurm",
                                 "--nccl-ras.poll-interval=3600", *flags)
        collector = registry.load()["nccl-ras"].factory(config)
        made.append(collector)
        deadline = time.monotonic() + 20
        while first and not collector.poller.state.result and time.monotonic() < deadline:
            time.sleep(0.02)
        return collector

    yield start
    for collector in made:
        collector.close()


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def value(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]))
            if all(got.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def series(text: str, name: str) -> list[dict]:
    return [dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]), value=float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines() if line.startswith(name + "{")]


def test_golden_exposition_of_a_node(collectors, tmp_path, golden):
    job = make_job()
    job.kill(1)
    job.set_async_error(6, 6)
    with RasService(job) as service:
        collector = collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2",
                               f"--jobs.mapping-dir={jobs_dir(tmp_path)}")
        golden("nccl-ras/node-10.0.0.2.prom", VOLATILE.sub("", render(collector)))


def test_a_rank_that_stopped_entering_collectives_keeps_its_count_while_its_peers_are_ahead(collectors, tmp_path):
    job = make_job(lead=1)
    with RasService(job) as service:
        collector = collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2",
                               f"--jobs.mapping-dir={jobs_dir(tmp_path)}")
        world = m.RANK_COLLECTIVES.name
        before = render(collector)
        job.stop_entering(5)            # node 10.0.0.2, GPU 1
        job.advance(3)
        assert collector.poller.poll_once() == "ok"
        during = render(collector)
        job.advance(3)
        assert collector.poller.poll_once() == "ok"
        after = render(collector)

    def allreduce(text, rank):
        [s] = [s for s in series(text, world) if s["rank"] == rank and s["collective"] == "AllReduce"]
        return s["value"]

    frozen = [allreduce(t, "5") for t in (before, during, after)]
    peer = [allreduce(t, "4") for t in (before, during, after)]
    assert frozen[0] == frozen[1] == frozen[2] == 40
    assert peer[1] > peer[0] and peer[1] > frozen[1]      # its peers went on (then wait for it)
    [labels] = [s for s in series(after, world) if s["rank"] == "5" and s["collective"] == "AllReduce"]
    assert (labels["gpu"], labels["job_id"]) == ("1", "4242")


def test_a_text_answer_of_an_older_nccl_names_the_rank_behind(collectors):
    job = make_job(lead=1)
    job.stop_entering(5)
    job.advance(3)
    with RasService(job, "2.26.2") as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2"))
    assert value(text, m.RAS_INFO.name, format="text", nccl_version="2.26.2", protocol="2") == 1
    counts = {(s["rank"], s["collective"]): s["value"] for s in series(text, m.RANK_COLLECTIVES.name)}
    world_rank_5 = [k for k in counts if k == ("5", "AllReduce")]
    assert world_rank_5 and counts[("5", "AllReduce")] == 40
    assert all(rank in ("1", "5") for rank, _ in counts)   # the ranks the answer singles out, nothing else


def test_a_rank_gone_on_another_node_is_named_by_this_one(collectors):
    job = make_job()
    job.kill(2)                         # node 10.0.0.1, GPU 2
    with RasService(job) as service:
        collector = collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2")
        unresponsive = render(collector)
        job.declare_dead(2)
        collector.poller.poll_once()
        dead = render(collector)
    for text, reason in ((unresponsive, "unresponsive"), (dead, "dead")):
        [missing] = series(text, m.MISSING_RANK_INFO.name)
        assert (missing["rank"], missing["address"], missing["pid"], missing["gpu"], missing["reason"]) == \
            ("2", "10.0.0.1", "100002", "2", reason)
    assert value(unresponsive, m.RAS_UNRESPONSIVE_PROCESSES.name) == 1 and value(dead, m.RAS_DEAD_PROCESSES.name) == 1
    assert value(dead, m.COMMUNICATOR_DEAD_RANKS.name) == 1 and value(dead, m.COMMUNICATOR_MISSING_RANKS.name) == 1
    # here: the world communicator and 10.0.0.2's own; 10.0.0.1's (which lost the rank too) has no rank here
    assert value(dead, m.RAS_COMMUNICATORS.name, scope="local") == 2
    assert value(dead, m.RAS_COMMUNICATORS.name, scope="answer") == 3


def test_connection_refused_is_no_job_and_drops_the_last_answer(collectors, refused_port):
    text = render(collectors(f"--nccl-ras.address=127.0.0.1:{refused_port}"))
    assert value(text, m.RAS_NO_JOB.name) == 1 and value(text, m.RAS_UP.name) == 0
    assert value(text, m.RAS_POLLS.name, result="no_job") == 1 and value(text, m.RAS_POLLS.name, result="error") == 0
    assert "lockstep_nccl_communicator" not in text and m.RAS_ANSWER_AGE.name not in text

    service = RasService(make_job()).start()
    collector = collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2")
    assert value(render(collector), m.COMMUNICATOR_RANKS.name) is not None
    service.stop()                      # the job ends
    assert collector.poller.poll_once() == "no_job"
    text = render(collector)
    assert value(text, m.RAS_NO_JOB.name) == 1 and "lockstep_nccl_communicator" not in text


@pytest.fixture
def silent_listener():
    """A listener that accepts connections and never answers; yields (address, accepted connections)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except socket.timeout:
                continue
            except OSError:
                return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join(5)
    server.close()
    for conn in accepted:
        conn.close()


def test_a_listener_that_never_answers_delays_no_scrape(collectors, silent_listener):
    address, accepted = silent_listener
    collector = collectors(f"--nccl-ras.address={address}", "--nccl-ras.timeout=120", first=False)
    stack_mod.wait_on(lambda: bool(accepted), 20, "the poll to connect")
    text = render(collector)           # while the poll waits on the silent listener
    assert collector.poller.state.result == "" and collector.poller._thread.is_alive()
    assert value(text, m.RAS_POLLS.name, result="ok") == 0 and m.RAS_UP.name not in text


def test_the_last_answer_is_served_with_its_age_while_ras_does_not_answer():
    job = make_job()
    answers = [RasAnswer("json", 2, render_json(job))]

    def ask() -> RasAnswer:
        if answers:
            return answers.pop()
        raise RasTimeout("no answer before the deadline")

    options = NcclRasOptions(node_addresses=("10.0.0.2",))
    collector = NcclRasCollector(RasPoller(options, lambda gpu, pid: "", ask))
    assert collector.poller.poll_once() == "ok"
    time.sleep(0.05)
    assert collector.poller.poll_once() == "timeout"
    text = render(collector)
    assert value(text, m.RAS_UP.name) == 0 and value(text, m.RAS_NO_JOB.name) == 0
    assert value(text, m.RAS_ANSWER_AGE.name) >= 0.05 and value(text, m.COMMUNICATOR_RANKS.name) == 8
    assert value(text, m.RAS_POLLS.name, result="timeout") == 1 and value(text, m.RAS_POLLS.name, result="ok") == 1


def test_the_communicator_cap_is_reported_and_problems_come_first(collectors):
    job = make_job()
    job.kill(5)                         # the node communicator of 10.0.0.2 has a missing rank; the world one too
    job.set_async_error(7, 2)
    with RasService(job) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.0.0.2",
                                 "--nccl-ras.max-communicators=1", "--nccl-ras.max-missing-ranks=0"))
    assert [value(text, m.RAS_COMMUNICATORS.name, scope=s) for s in m.COMMUNICATOR_SCOPES] == [3, 2, 1]
    assert value(text, m.RAS_COMMUNICATORS_LIMIT.name) == 1
    [size] = series(text, m.COMMUNICATOR_RANKS.name)
    assert size["value"] == 8          # both have problems: the larger one
    assert m.MISSING_RANK_INFO.name not in text.replace(f"# HELP {m.MISSING_RANK_INFO.name}", "")


def test_the_job_comes_from_the_process_where_the_mapping_has_no_gpu(collectors, tmp_path):
    procfs = tmp_path / "proc"
    (procfs / "net").mkdir(parents=True)
    (procfs / "net/fib_trie").write_text("Local:\n  +-- 10.0.0.0/8 2 0 2\n     |-- 10.0.0.2\n        /32 host LOCAL\n")
    for pid in range(101000, 101004):
        (procfs / str(pid)).mkdir()
        (procfs / str(pid) / "cgroup").write_text(f"0::/system.slice/slurmstepd.scope/job_777/step_0/user/task_{pid}\n")
    with RasService(make_job()) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", f"--path.procfs={procfs}",
                                 f"--jobs.mapping-dir={tmp_path / 'none'}"))
    ranks = series(text, m.RANK_INFO.name)
    assert len(ranks) == 8 and {s["job_id"] for s in ranks} == {"777"}   # 4 GPUs, 2 communicators each


def test_no_rank_here_means_no_communicator_series(collectors):
    with RasService(make_job()) as service:
        text = render(collectors(f"--nccl-ras.address={service.address}", "--nccl-ras.node-address=10.9.9.9"))
    assert value(text, m.RAS_UP.name) == 1 and value(text, m.RAS_COMMUNICATORS.name, scope="local") == 0
    assert "lockstep_nccl_communicator" not in text and "lockstep_nccl_rank" not in text


@pytest.mark.parametrize("flag", ["--nccl-ras.address=nope", "--nccl-ras.address=host:0", "--nccl-ras.timeout=0",
                                  "--nccl-ras.poll-interval=-1", "--nccl-ras.max-communicators=-1"])
def test_bad_flags_name_themselves(flag):
    with pytest.raises(ValueError, match=flag.split("=")[0]):
        NcclRasOptions.from_config(exporter_config("--collector.nccl-ras", flag))


def test_the_catalog_documents_every_label_value_and_names_no_node():
    for metric, values in ((m.RAS_POLLS, m.POLL_RESULTS), (m.RAS_COMMUNICATORS, m.COMMUNICATOR_SCOPES),
                           (m.RANK_INFO, m.RANK_STATES), (m.MISSING_RANK_INFO, m.MISSING_REASONS),
                           (m.RANK_COLLECTIVES, m.COLLECTIVES + (m.ALL_COLLECTIVES,))):
        assert all(v in metric.help for v in values), metric.name
    assert all("node" not in x.labels and "hostname" not in x.labels for x in m.METRICS)


# --- the agent as a process, scraped over HTTP -------------------------------------------------------------

def start_agent(workdir: Path, *flags: str) -> stack_mod.Service:
    return stack_mod.start_on_port("lockstep-exporter", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults", "--collector.nccl-ras", "--jobs.source=slurm", *flags],
        workdir, ready_path="/metrics", timeout=60)


def scrape(agent: stack_mod.Service, timeout: float = 10.0) -> str:
    status, body = stack_mod.http_get(agent.url + "/metrics", timeout=timeout)
    assert status == 200
    return body.decode()


@pytest.mark.integration
def test_the_agent_serves_ras_and_the_stopped_rank_over_http(stack, tmp_path):
    job = make_job(lead=1)
    with RasService(job, "2.29.2") as service:
        agent = stack.add(start_agent(tmp_path / "agent", f"--nccl-ras.address={service.address}",
                                      "--nccl-ras.node-address=10.0.0.2", "--nccl-ras.poll-interval=0.2",
                                      f"--jobs.mapping-dir={jobs_dir(tmp_path)}"))

        def count(rank: str) -> float | None:
            return value(scrape(agent), m.RANK_COLLECTIVES.name, rank=rank, collective="AllReduce",
                         job_id="4242", comm=f"{job.comms[[c.name for c in job.comms].index('world')].hash:016x}")

        stack_mod.wait_on(lambda: count("5") == 40, 30, "rank 5's count", [agent])
        job.stop_entering(5)
        job.advance(5)
        stack_mod.wait_on(lambda: count("4") == 44, 30, "rank 4 one step ahead", [agent])
        polls = value(scrape(agent), m.RAS_POLLS.name, result="ok")
        stack_mod.wait_on(lambda: value(scrape(agent), m.RAS_POLLS.name, result="ok") >= polls + 3, 30,
                          "three more polls", [agent])
        assert count("5") == 40 and count("4") == 44
        assert value(scrape(agent), m.RAS_INFO.name, format="json", nccl_version="2.29.2") == 1


@pytest.mark.integration
def test_the_agent_answers_a_scrape_while_ras_never_answers(stack, tmp_path, silent_listener):
    address, accepted = silent_listener
    agent = stack.add(start_agent(tmp_path / "agent", f"--nccl-ras.address={address}", "--nccl-ras.timeout=300"))
    stack_mod.wait_on(lambda: bool(accepted), 30, "the agent's poll to connect", [agent])
    text = scrape(agent, timeout=10)     # a generous deadline: the poll under way waits up to 300 s
    assert value(text, m.RAS_POLLS.name, result="timeout") == 0 and m.RAS_UP.name not in text
    assert value(text, "lockstep_scrape_collector_success", collector="nccl-ras") == 1


@pytest.mark.integration
def test_the_agent_says_no_job_when_nothing_listens(stack, tmp_path, refused_port):
    agent = stack.add(start_agent(tmp_path / "agent", f"--nccl-ras.address=127.0.0.1:{refused_port}"))
    stack_mod.wait_on(lambda: value(scrape(agent), m.RAS_NO_JOB.name) == 1, 30, "no_job", [agent])
