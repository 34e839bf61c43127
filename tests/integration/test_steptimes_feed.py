"""The step-time scorer on the real PAI job (tests/fixtures/pai/job_3_norm.csv) gives the same findings whether its
steps come from the CSV or through the live path: each worker's steps handed to the training feed, the node agent's
``steps`` collector exporting its counters, a real Prometheus holding them, and the step times read back from
Prometheus by ``lockstep.analytics.prom.ranksteps`` (what ``lockstep analytics steptimes --prometheus-url`` runs).

What is real: the feed (``lockstep.training.Feed``, the object ``step_end()`` drives, one per worker with that
rank's environment, sending its datagrams on a real socket), the agent's collector (built from the agent's flags
through its registry, one agent per worker's node, receiving on its own thread and placing the rank on the node's
GPU and Slurm job), the exposition the agent serves, Prometheus' storage (TSDB blocks) and its query engine, and
the reader.

What is compressed: time. The job's 249 records of mini-batch time, normalised 0-1000, are taken as milliseconds
(620-1000 ms steps, about three minutes of steps per worker): the feed's clock is injected, each worker's steps
ending at its own cumulative times. The scrape is emulated: right after each step end of a worker, its agent's
exposition is rendered, labelled as Prometheus labels a node agent's scrape (``job``, ``instance``, ``node``),
stamped with that moment and written to TSDB blocks with ``promtool tsdb create-blocks-from openmetrics`` (as
``lockstep.backfill`` does). So each scrape covers exactly one step, and each row read back is one step's time;
the CSV holds one iteration in ten, each record here is one step.

The feed cannot time a process's first step from that step's end alone (nothing before it to measure from): each
worker reports its loop's start first (``train_start()`` before its first step, as docs/pace.md advises; the agent
then holds the rank at zero steps), so every record of the CSV reaches Prometheus. Without that report each worker's
first record is lost, the scorer's baseline (its first records) moves by one, and on this job worker 9 is first
flagged two records later (2,291, not 2,271): the same workers, not the same first flags.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp
import pytest

from lockstep import training
from lockstep.analytics.prom import ranksteps
from lockstep.analytics.scoring.steptimes import parse_csv, result
from lockstep.cli import main
from lockstep.exporters import registry
from lockstep.exporters.catalog.selectors import NODE_JOB
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.stack import Stack, require_binary, start_prometheus, wait_on
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration

PAI = FIXTURES / "pai/job_3_norm.csv"
GPUS_JSON = FIXTURES / "gpu" / "node00" / "gpus.json"
JOB = "pai-job-3"
SECONDS_PER_UNIT = 0.001      # the normalised 0-1000 as milliseconds


def node_dir(root: Path, name: str) -> Path:
    """A simulated node: the GPUs of gpus.json, the Slurm job on GPU 0."""
    node = root / name
    (node / "gpu-jobs").mkdir(parents=True)
    shutil.copy(GPUS_JSON, node / "gpus.json")
    (node / "gpu-jobs" / "0").write_text(f"{JOB}\n")
    return node


def scraped(exposition: str, node: str, stamp: float) -> list[str]:
    """The exposition's samples as Prometheus stores a scrape of the node agent: its target labels added, the
    scrape's time stamped (OpenMetrics)."""
    target = f'job="{NODE_JOB}",instance="{node}:9840",node="{node}"'
    out = []
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, brace, labels = series.partition("{")
        out.append(f"{name}{{{target}{',' + labels[:-1] if brace else ''}}} {value} {stamp:.3f}")
    return out


def feed_the_job(root: Path, steps_by_worker: dict[str, list[tuple[int, float]]], wall0: float) -> list[str]:
    """Each worker's steps through its feed into its node's agent; the agent scraped after each step end."""
    lines: list[str] = []
    mono0 = time.monotonic() - (time.time() - wall0)   # the feed's clock, reading wall0 at the job's start
    for worker, steps in steps_by_worker.items():
        name = f"node{int(worker):02d}"
        node = node_dir(root, name)
        config = exporter_config("--collector.disable-defaults", "--collector.steps", "--jobs.source=slurm",
                                 f"--sim.node-root={node}", f"--steps.socket={node / 's.sock'}")
        collector = registry.load()["steps"].factory(config)
        feed = training.Feed({"RANK": worker, "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "0"},
                             str(node / "s.sock"), interval=0)
        encoder = Encoder()
        try:
            at = 0.0
            for count, (step, seconds) in enumerate([(None, 0.0), *steps]):   # first the loop's start
                at += seconds
                if step is None:
                    feed.start(_clock=lambda now=mono0 + at: now)
                else:
                    feed.end(step, _clock=lambda now=mono0 + at: now)
                wait_on(lambda c=collector, n=count: any(r.steps == n for r in c.table.snapshot()[0]), 10.0,
                        f"worker {worker}'s step {step} at its agent", every=0.0002)
                families: dict = {}
                encoder.add(families, collector.collect())
                lines += scraped(render_text(families), name, wall0 + at + 0.001)
            assert feed.dropped == 0
        finally:
            feed.close()
            collector.close()
    return lines


def test_the_scorer_finds_the_same_on_the_pai_job_from_the_csv_and_through_the_feed_into_prometheus(capsys):
    frame = parse_csv(PAI)
    reference = result(frame)                    # what `lockstep analytics steptimes job_3_norm.csv` finds
    assert reference["stragglers"] and reference["imbalance"]   # a comparison of nothing would prove nothing

    steps_by_worker = {w: [(int(r.step), r.seconds * SECONDS_PER_UNIT) for r in rows.sort_values("step").itertuples()]
                       for w, rows in frame.groupby("worker")}
    wall0 = float(int(time.time()) - 3 * 3600)   # the job ran three hours ago: its blocks lie in the past
    root = Path(tempfile.mkdtemp(prefix="stl", dir="/tmp"))    # short: a socket's path is at most 107 bytes
    try:
        lines = feed_the_job(root, steps_by_worker, wall0)
        (root / "scrapes.om").write_text("\n".join(lines) + "\n# EOF\n")
        with Stack() as stack:
            data = root / "prom" / "data"
            data.mkdir(parents=True)
            subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                            str(root / "scrapes.om"), str(data)], check=True, capture_output=True, timeout=60)
            prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}}, root / "prom"))
            end = wall0 + max(sum(s for _, s in steps) for steps in steps_by_worker.values()) + 60

            async def read():
                async with aiohttp.ClientSession() as session:
                    return await ranksteps.read(session, prom.url, JOB, wall0 - 60, end, 30.0)
            live = asyncio.run(read())
            # the command reads the same rows
            assert main(["analytics", "steptimes", "--prometheus-url", prom.url, "--job", JOB, "--from",
                         str(wall0 - 60), "--to", str(end), "--json"]) == 0
            command = json.loads(capsys.readouterr().out)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    # every record came back, each one step's time
    back = live.set_index(["worker", "step"])["seconds"].sort_index() / SECONDS_PER_UNIT
    sent = frame.set_index(["worker", "step"])["seconds"].sort_index()
    assert back.index.equals(sent.index)
    assert (back - sent).abs().max() < 1e-6

    found = result(live)
    assert [(s["worker"], s["first_flagged_step"]) for s in found["stragglers"]] == \
        [(s["worker"], s["first_flagged_step"]) for s in reference["stragglers"]]
    assert [s["score"] for s in found["stragglers"]] == pytest.approx([s["score"] for s in reference["stragglers"]],
                                                                     abs=0.01)
    (imb,), (ref_imb,) = found["imbalance"], reference["imbalance"]
    assert [r["worker"] for r in imb["ranks"]] == [r["worker"] for r in ref_imb["ranks"]]
    assert [r["ratio"] for r in imb["ranks"]] == pytest.approx([r["ratio"] for r in ref_imb["ranks"]], abs=0.01)
    assert imb["lost_share"] == pytest.approx(ref_imb["lost_share"], abs=0.01)
    assert command["stragglers"] == found["stragglers"]
    assert [r["worker"] for r in command["imbalance"][0]["ranks"]] == [r["worker"] for r in ref_imb["ranks"]]
