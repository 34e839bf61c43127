"""The stores bench_serve.py runs against, built once per scenario and kept under its directory:

- ``data``: ``lockstep sim backfill``'s blocks of the scenario, the analytics' series (refresh_data.py);
- ``prom-rules/data``: the same blocks (hard links) and the analytics and fleet inputs recorded over them by
  Prometheus itself (``promtool tsdb create-blocks-from rules`` with the generated groups), compacted into them;
- ``vm-raw``: a VictoriaMetrics storage holding the same series (vmctl, as a migration does);
- ``vm-rules``: that storage (copied) and the inputs recorded by vmalert from the same rule file (its
  replay mode), as a vmalert running beside it would have.
Each step leaves a ``.done`` file with what it cost; a step that is done is not run again.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from lockstep.stack import Stack, http_get, require_binary, start_prometheus, start_victoria_metrics, vmctl_from_prometheus

PROM_CONFIG = {"global": {"scrape_interval": "5s"}, "scrape_configs": []}
# What the stores need to record 65,536 GPUs' inputs in one pass (the service itself runs on their defaults).
PROM_RULES_ARGS = ["--query.max-samples=1000000000", "--query.timeout=60m"]
VM_REPLAY_ARGS = ["-search.maxUniqueTimeseries=5000000", "-search.maxQueryDuration=60m", "-search.disableCache"]


def rules_file(workdir: Path) -> Path:
    """The generated rules' groups the service reads: the analytics inputs and the fleet pass's inputs."""
    from lockstep.alerts import recording
    from lockstep.alerts.settings import AlertsConfig
    from lockstep.exporters.catalog.recorded import ANALYTICS_GROUP, FLEET_INPUTS_GROUP

    groups = [g for g in recording.groups(AlertsConfig()) if g["name"] in (ANALYTICS_GROUP, FLEET_INPUTS_GROUP)]
    path = workdir / "analytics-inputs.yml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def prepare(scenario: dict, workdir: Path, kinds: set[str]) -> float:
    """The scenario's stores of ``kinds`` (``prom-rules``, ``vm-raw``, ``vm-rules``; the raw blocks
    always) under ``workdir``; returns the scenario's start."""
    from refresh_data import backfill

    _, start = backfill(scenario, workdir)
    end = start + scenario["duration_s"]
    rules = hashlib.sha256(rules_file(workdir).read_bytes()).hexdigest() if kinds & {"prom-rules", "vm-rules"} else ""
    if "prom-rules" in kinds:
        _step(workdir / "prom-rules", lambda out: _prom_rules(workdir, out, start, end), rules)
    if kinds & {"vm-raw", "vm-rules"}:
        _step(workdir / "vm-raw", lambda out: _vm_raw(workdir, out))
    if "vm-rules" in kinds:
        _step(workdir / "vm-rules", lambda out: _vm_rules(workdir, out, start, end), rules)
    return start


def cost(workdir: Path) -> dict:
    """What each step built here cost (wall seconds), by step."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(workdir.glob("*/.done"))}


def _step(out: Path, build, key: str = "") -> None:
    """``build(out)`` once; again where ``key`` (the recording rules' digest, for a store holding what they
    recorded) differs from the one it was built with: a store recorded by older rules lacks the inputs the
    service now reads recorded, and would be measured reading them raw."""
    done = out / ".done"
    if done.exists() and json.loads(done.read_text()).get("key", "") == key:
        return
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    build(out)
    done.write_text(json.dumps({"wall_s": time.perf_counter() - t0, "load": os.getloadavg()[0], "key": key}))


def _prom_rules(workdir: Path, out: Path, start: float, end: float) -> None:
    shutil.copytree(workdir / "data", out / "data", copy_function=os.link,
                    ignore=shutil.ignore_patterns("wal", "chunks_head", "lock", "queries.active"))
    with Stack() as stack:
        prom = _prometheus_on(workdir, stack)
        made = out / "recorded"
        subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "rules", f"--start={start:.0f}",
                        f"--end={end:.0f}", f"--url={prom.url}", f"--output-dir={made}", "--quiet",
                        str(rules_file(workdir))], check=True, capture_output=True, text=True)
    for block in made.iterdir():
        shutil.move(str(block), out / "data" / block.name)
    _compact(out)


def _compact(out: Path, timeout_s: float = 7200.0) -> None:
    """Let Prometheus merge the recorded blocks into the raw ones they overlap, once, here: it does so in the
    background a minute after it starts, for minutes of both cores at 65,536 GPUs, and a run that met it measured
    the store compacting beside the service (the first result of 65,536 GPUs 528 s instead of 251)."""
    with Stack() as stack:
        stack.add(start_prometheus(PROM_CONFIG, out, extra_args=PROM_RULES_ARGS))
        deadline = time.monotonic() + timeout_s
        while _overlapping(out / "data"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{out / 'data'}: blocks still overlap after {timeout_s:.0f} s")
            time.sleep(5)


def _overlapping(data: Path) -> bool:
    """Whether two of the TSDB's blocks cover the same time (their meta.json; a block being written or removed is
    left out)."""
    spans = []
    for meta in data.glob("*/meta.json"):
        try:
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        spans.append((m["minTime"], m["maxTime"]))
    spans.sort()
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


def _prometheus_on(workdir: Path, stack: Stack):
    """A Prometheus on the raw blocks (through hard links: it compacts what it opens)."""
    source = workdir / "rules-source"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(workdir / "data", source / "data", copy_function=os.link,
                    ignore=shutil.ignore_patterns("wal", "chunks_head", "lock", "queries.active"))
    return stack.add(start_prometheus(PROM_CONFIG, source, extra_args=PROM_RULES_ARGS))


def _vm_raw(workdir: Path, out: Path) -> None:
    with Stack() as stack:
        vm = stack.add(start_victoria_metrics(out, extra_args=["-search.disableCache", "-dedup.minScrapeInterval=1ms"]))
        vmctl_from_prometheus(workdir / "data", vm, timeout=7200.0)


def _vm_rules(workdir: Path, out: Path, start: float, end: float) -> None:
    shutil.copytree(workdir / "vm-raw" / "vm-data", out / "vm-data", copy_function=os.link)
    with Stack() as stack:
        vm = stack.add(start_victoria_metrics(out, extra_args=VM_REPLAY_ARGS + ["-dedup.minScrapeInterval=1ms"]))
        subprocess.run([require_binary("vmalert"), f"-rule={rules_file(workdir)}", f"-datasource.url={vm.url}",
                        f"-remoteWrite.url={vm.url}", f"-replay.timeFrom={_rfc3339(start - 60)}",
                        f"-replay.timeTo={_rfc3339(end)}", "-replay.disableProgressBar", "-datasource.queryStep=0s",
                        "-replay.maxDatapointsPerQuery=60", "-replay.rulesDelay=10s", "-remoteWrite.flushInterval=1s",
                        "-remoteWrite.maxQueueSize=2000000", "-remoteWrite.concurrency=2",
                        "-httpListenAddr=127.0.0.1:0"], check=True, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=7200)
        for path in ("/internal/force_flush", "/internal/resetRollupResultCache"):
            http_get(vm.url + path, timeout=120)


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
