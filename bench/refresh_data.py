"""TSDB blocks of a scenario for bench_refresh.py, written by ``lockstep sim backfill`` (streamed: memory
stays bounded at 16,384 GPUs) with the series the analytics read, built once per scenario and kept
(``done.json`` holds the scenario they were built from, its start time and what the backfill cost)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml


def backfill(scenario: dict, workdir: Path) -> tuple[Path, float]:
    """``workdir`` (Prometheus' working dir, blocks under ``data``) holding ``scenario``, and its start."""
    done = workdir / "done.json"
    if done.exists() and json.loads(done.read_text())["scenario"] == scenario:
        return workdir, json.loads(done.read_text())["start"]
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    path = workdir / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    t0, log = time.perf_counter(), workdir / "backfill.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "lockstep", "sim", "backfill", str(path), "--out",
                                 str(workdir / "data"), "--days", repr(scenario["duration_s"] / 86400),
                                 "--metrics", "analytics", "--samples-per-file", str(samples_per_file(scenario))],
                                stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)      # this child's own peak (promtool's runs are its children)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"lockstep sim backfill {path}: {log.read_text()[-3000:]}")
    cost = {"wall_s": time.perf_counter() - t0, "peak_rss_mb": usage.ru_maxrss / 1024}
    done.write_text(json.dumps({"scenario": scenario, "start": _start(path), "backfill": cost}))
    return workdir, _start(path)


def samples_per_file(scenario: dict) -> int:
    """promtool's cost per file grows with the series in it (each file holds every series of its ticks): a
    65,536-GPU job's 2 million series in files of 10 million samples made 67 files of 5 ticks, an hour of
    promtool; four times as many samples per file (about 9 GB of promtool's memory) make it a quarter."""
    return 40_000_000 if scenario["cluster"]["nodes"] * scenario["cluster"]["gpus_per_node"] >= 65536 else 10_000_000


def _start(path: Path) -> float:
    from lockstep.simulator.scenario import load_scenario
    from lockstep.simulator.truth import Truth

    return float(Truth(load_scenario(path)).document()["start_timestamp"])
