"""The ``steps`` collector: the training processes' reports held per process and summed per rank (a restarted rank
continues its count, a silent one goes after its TTL, a flood of processes is refused and counted), placed on the
node's GPU and job; and the real node agent counting a feed over its socket, with the feed never waiting once the
agent is stopped."""
from __future__ import annotations

import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lockstep import stack as stack_mod
from lockstep import training
from lockstep.exporters import registry
from lockstep.exporters.catalog import pace as m
from lockstep.exporters.catalog import stepfeed
from lockstep.exporters.collectors.steps import StepTable, rank_samples
from lockstep.exporters.jobs.placement import Placement
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES

GPUS_JSON = FIXTURES / "gpu" / "node00" / "gpus.json"
UUID = [f"GPU-2f6c1c1e-0b3a-4c55-9d7e-00000000000{g}" for g in range(3)]


def report(pid=1, session="s1", steps=10, seconds=15.0, end=1000.0, step=9, rank="3", gpu="1", job="") -> bytes:
    return stepfeed.encode(stepfeed.Report(stepfeed.Identity(job, rank, "", gpu), pid, session, steps, step, end,
                                           seconds))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def place(device: str) -> Placement:
    return {"1": Placement("1", UUID[1], "4242"), UUID[2]: Placement("2", UUID[2], "ns/job")}.get(
        device, Placement("", "", ""))


def samples_of(table: StepTable) -> dict[tuple[str, tuple[str, ...]], float]:
    reports, retired, _ = table.snapshot()
    return {(s.metric.name, s.labels): s.value for s in rank_samples(reports, retired, place)}


def test_a_rank_is_placed_on_the_nodes_gpu_and_job_and_counts_its_steps():
    table = StepTable(8, 60)
    assert table.receive(report(job="from-env")) == "accepted"
    assert table.receive(report(pid=2, session="s2", rank="4", gpu=UUID[2], steps=3, seconds=3.0, step=-1)) == "accepted"
    assert table.receive(report(pid=3, session="s3", rank="5", gpu="GPU-unknown", job="77", steps=1, seconds=0.0))
    got = samples_of(table)
    assert got[(m.RANK_STEPS.name, ("4242", "3", "1"))] == 10          # the mapping's job, not the process's
    assert got[(m.RANK_STEP_SECONDS_TOTAL.name, ("4242", "3", "1"))] == 15.0
    assert got[(m.RANK_STEP_END.name, ("4242", "3", "1"))] == 1000.0
    assert got[(m.RANK_LAST_STEP.name, ("4242", "3", "1"))] == 9
    assert got[(m.RANK_STEPS.name, ("ns/job", "4", "2"))] == 3           # a Kubernetes job, from its UUID
    assert (m.RANK_LAST_STEP.name, ("ns/job", "4", "2")) not in got      # no step number given
    assert got[(m.RANK_STEPS.name, ("77", "5", ""))] == 1                # a GPU the node doesn't list


def test_a_restarted_rank_continues_its_count_and_a_silent_process_goes_after_its_ttl():
    clock = Clock()
    table = StepTable(8, 60, clock)
    table.receive(report(steps=100, seconds=150.0, end=1000.0))
    clock.now += 30
    table.receive(report(pid=9, session="s9", steps=5, seconds=6.0, end=1100.0, step=4))   # its new process
    key = ("4242", "3", "1")
    assert samples_of(table)[(m.RANK_STEPS.name, key)] == 105
    clock.now += 45                                    # the old process: 75 s silent; the new one: 45 s
    got = samples_of(table)
    assert got[(m.RANK_STEPS.name, key)] == 105 and got[(m.RANK_STEP_SECONDS_TOTAL.name, key)] == 156.0
    assert got[(m.RANK_STEP_END.name, key)] == 1100.0 and got[(m.RANK_LAST_STEP.name, key)] == 4
    assert len(table.snapshot()[0]) == 1
    clock.now += 200                                   # everyone silent past the TTL: the rank goes
    assert samples_of(table) == {}


def test_a_report_older_than_the_one_held_is_ignored():
    table = StepTable(8, 60)
    table.receive(report(steps=10))
    table.receive(report(steps=9))
    assert samples_of(table)[(m.RANK_STEPS.name, ("4242", "3", "1"))] == 10


def test_more_processes_than_the_cap_are_refused_and_counted_junk_is_malformed():
    table = StepTable(2, 60)
    results = [table.receive(report(pid=p, session=f"s{p}", rank=str(p))) for p in range(4)]
    assert results == ["accepted", "accepted", "refused", "refused"]
    assert table.receive(report(pid=1, session="s1", steps=11)) == "accepted"     # one already held goes on
    assert table.receive(b"\x00garbage") == "malformed"
    assert table.receive(b"{" * 5000) == "malformed"
    assert table.snapshot()[2] == {"accepted": 3, "malformed": 2, "refused": 2}


@pytest.fixture
def node():
    """A node directory with a short path (its socket's name must stay under 108 bytes): GPUs of gpus.json, Slurm
    job 4242 on GPUs 0 and 1."""
    root = Path(tempfile.mkdtemp(prefix="stp", dir="/tmp")) / "node00"
    (root / "gpu-jobs").mkdir(parents=True)
    shutil.copy(GPUS_JSON, root / "gpus.json")
    for gpu in (0, 1):
        (root / "gpu-jobs" / str(gpu)).write_text("4242\n")
    yield root
    shutil.rmtree(root.parent, ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_feed():
    yield
    training._feed and training._feed.close()
    training._feed = None


def series(text: str, metric: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith(metric + "{") or line.startswith(metric + " "):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0])) if "{" in line else {}
            out.append(labels | {"value": float(line.rsplit(" ", 1)[1])})
    return out


def value(text: str, metric: str, **labels: str) -> float | None:
    for s in series(text, metric):
        if all(s.get(k) == v for k, v in labels.items()):
            return s["value"]
    return None


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def wait_for(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def test_the_collector_counts_a_feed_on_its_socket(node):
    config = exporter_config("--collector.disable-defaults", "--collector.steps", "--jobs.source=slurm",
                             f"--sim.node-root={node}")
    collector = registry.load()["steps"].factory(config)
    try:
        assert (node / "steps.sock").is_socket() and oct((node / "steps.sock").stat().st_mode & 0o777) == "0o666"
        feed = training.configure(env={"RANK": "7", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": UUID[1],
                                       "SLURM_JOB_ID": "999"}, socket_path=str(node / "steps.sock"), interval=0)
        for step in range(1, 6):
            training.step_end(step)
        # each check re-sends the totals, as the next interval would: a report lost to a full buffer is made good
        wait_for(lambda: feed.send() or value(render(collector), m.RANK_STEPS.name) == 5, "5 steps")
        text = render(collector)
        assert series(text, m.RANK_STEPS.name) == [{"job_id": "4242", "rank": "7", "gpu": "1", "value": 5.0}]
        assert value(text, m.RANK_LAST_STEP.name, rank="7") == 5
        assert value(text, m.STEPS_DATAGRAMS.name, result="accepted") >= 5
        assert value(text, m.STEPS_SENDERS.name) == 1 and value(text, m.STEPS_SENDERS_LIMIT.name) == 512
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as junk:
            junk.sendto(b"not a report", str(node / "steps.sock"))
        wait_for(lambda: value(render(collector), m.STEPS_DATAGRAMS.name, result="malformed") == 1, "the junk")
    finally:
        collector.close()
    assert not (node / "steps.sock").exists()


def test_a_stale_socket_is_replaced_and_any_other_file_refused(node):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as old:
        old.bind(str(node / "steps.sock"))
    config = exporter_config("--collector.steps", "--jobs.source=slurm", f"--sim.node-root={node}")
    registry.load()["steps"].factory(config).close()
    (node / "steps.sock").write_text("someone's file\n")
    with pytest.raises(OSError, match="not a socket"):
        registry.load()["steps"].factory(config)
    assert (node / "steps.sock").read_text() == "someone's file\n"


@pytest.mark.parametrize("flag", ["--steps.socket-mode=999", "--steps.ttl=0", "--steps.max-senders=0"])
def test_bad_flags_name_themselves(flag):
    with pytest.raises(ValueError, match=flag.split("=")[0]):
        registry.load()["steps"].factory(exporter_config("--collector.steps", flag))


def start_agent(workdir: Path, node: Path) -> stack_mod.Service:
    return stack_mod.start_on_port("lockstep-exporter", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        "--collector.disable-defaults", "--collector.steps", "--jobs.source=slurm", f"--sim.node-root={node}"],
        workdir, ready_path="/metrics", timeout=60)


@pytest.mark.integration
def test_the_agent_counts_the_feed_and_the_feed_never_waits_once_it_is_stopped(stack, node, tmp_path):
    agent = stack.add(start_agent(tmp_path / "agent", node))
    training.configure(env={"RANK": "3", "LOCAL_RANK": "1"}, socket_path=str(node / "steps.sock"), interval=0)

    def steps() -> float | None:
        training._feed.send()     # the interval's report: one lost to a full buffer is made good by the next
        status, body = stack_mod.http_get(agent.url + "/metrics", timeout=10)
        return value(body.decode(), m.RANK_STEPS.name, job_id="4242", rank="3", gpu="1")

    for step in range(50):
        training.step_end(step)
    stack_mod.wait_on(lambda: steps() == 50, 30, "the agent to count 50 steps", [agent])
    agent.stop()
    dropped = training.stats()["dropped"]
    started = time.perf_counter()
    for step in range(50, 5050):
        training.step_end(step)
    assert time.perf_counter() - started < 5
    assert training.stats()["dropped"] - dropped == 5000 and training.stats()["steps"] == 5050
