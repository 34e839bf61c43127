"""TSDB blocks of a scenario for bench_refresh.py, built once per scenario and kept (``done.json`` holds
the scenario they were built from and its start time)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import yaml


def backfill(scenario: dict, workdir: Path) -> tuple[Path, float]:
    """``workdir`` (Prometheus' working dir, blocks under ``data``) holding ``scenario``, and its start."""
    done = workdir / "done.json"
    if done.exists() and json.loads(done.read_text())["scenario"] == scenario:
        return workdir, json.loads(done.read_text())["start"]
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    start = _write_blocks(scenario, workdir)
    done.write_text(json.dumps({"scenario": scenario, "start": start}))
    return workdir, start


def _write_blocks(scenario: dict, workdir: Path) -> float:
    import pyarrow as pa
    import pyarrow.compute as pc

    from analytics.inputs import INPUT_METRICS
    from lockstep import localcluster
    from simulator.scenario import load_scenario
    from simulator.series import tables
    from simulator.truth import Truth

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario))
        loaded = load_scenario(path)
    wanted = pa.array(INPUT_METRICS)
    chunks = [t.filter(pc.is_in(t["metric"].cast(pa.string()), value_set=wanted)) for t in tables(loaded)]
    localcluster.backfill(pa.concat_tables(chunks).to_pandas(), workdir, max_block_duration="24h")
    return float(Truth(loaded).document()["start_timestamp"])
