"""``lockstep sim backfill`` into a real Prometheus: the blocks hold exactly the simulator's series.

The service's own query path (``source_prom.query_range`` and its decoder) reads back from Prometheus
the very frame the simulator computes in process, sample for sample, though promtool got it in several
files.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom import promql
from lockstep.exporters.catalog import CATALOG
from lockstep.simulator.scenario import load_scenario
from lockstep.simulator.series import series_frame
from lockstep.stack import Stack, http_get, start_prometheus
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

SCENARIO = REPO / "simulator/scenarios/xid.yaml"      # 4 nodes x 8 GPUs, 300 s at 5 s
START = "2026-03-01T00:00:00Z"
STEP, MINUTES = 10.0, 10                               # coarser than the scenario, longer than its 300 s
PER_FILE = 8000                                        # samples per promtool run: several runs


def backfill(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockstep", "sim", "backfill", str(SCENARIO), "--out", str(out),
                           *args], capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    work = tmp_path_factory.mktemp("backfill")
    proc = backfill(work / "data", "--days", str(MINUTES / 1440), "--step", str(STEP), "--start", START,
                    "--metrics", "analytics", "--samples-per-file", str(PER_FILE))
    assert proc.returncode == 0, proc.stderr
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, work)), proc


def expected_frame() -> pd.DataFrame:
    """The simulator's own frame over the same ticks (the step and the start changed as asked)."""
    import dataclasses
    scenario = load_scenario(SCENARIO)
    start = pd.Timestamp(START).timestamp()
    longer = dataclasses.replace(scenario, sample_period_s=STEP, start_timestamp=start, duration_s=MINUTES * 60.0)
    frame = series_frame(longer)
    return frame[frame["timestamp"] < start + MINUTES * 60]   # --days 10 minutes: 60 samples, not 61


async def _fetch(url: str, window: source_prom.Window) -> pd.DataFrame:
    """Every input metric's own series over ``window``, as the service reads answers (``query_range`` on
    its grid, decoded by ``lockstep.analytics.prom.decode``), as a long frame with the catalog's labels."""
    async with aiohttp.ClientSession() as session:
        parts = [_long(m, await source_prom.query_range(session, url, promql.selector(m), window, 30.0), window)
                 for m in INPUT_METRICS]
    return pd.concat(parts, ignore_index=True).fillna("")


def _long(metric: str, block, window: source_prom.Window) -> pd.DataFrame:
    part = pd.DataFrame({"timestamp": window.times()[block.rows], "value": block.values, "metric": metric})
    for label in ("node", *CATALOG[metric].labels):
        part[label] = np.asarray([s.get(label, "") for s in block.labels], dtype=object)[block.series]
    return part


def _canonical(frame: pd.DataFrame) -> pd.DataFrame:
    labels = [c for c in frame.columns if c not in ("timestamp", "value")]
    frame = frame.astype({c: str for c in labels})
    return frame.sort_values([*labels, "timestamp"]).reset_index(drop=True)


def test_the_service_reads_back_the_simulators_own_samples(prometheus):
    prom, proc = prometheus
    direct = expected_frame()
    start, end = float(direct["timestamp"].min()), float(direct["timestamp"].max())
    assert end - start == MINUTES * 60 - STEP   # the whole range, beyond the scenario's own 300 s
    read = _canonical(asyncio.run(_fetch(prom.url, source_prom.Window(start, end, STEP))))
    direct = direct[direct["metric"].isin(INPUT_METRICS) & (direct["metric"] != "lockstep_rank_step_seconds")]
    direct = _canonical(direct[read.columns.intersection(direct.columns)])
    keys = [c for c in direct.columns if c != "value"]
    both = direct.merge(read[direct.columns], how="left", on=keys, suffixes=("", "_read"), indicator=True)
    assert len(direct) > 0 and (both["_merge"] == "both").all()
    np.testing.assert_array_equal(both["value_read"], both["value"])
    # Rows only Prometheus has: a series gone from the simulator (the GPU lost to XID 79 stops
    # reporting) or a scrape the noise missed (blocks carry no staleness markers) is still answered
    # for Prometheus' 5-minute lookback, with the series' sample before it.
    extra = read.merge(direct[keys], how="left", on=keys, indicator=True)
    extra = extra[extra["_merge"] == "left_only"].drop(columns="_merge")
    series = [c for c in keys if c != "timestamp"]
    near = direct.sort_values("timestamp").assign(near_t=lambda d: d["timestamp"]).rename(columns={"value": "near_v"})
    extra = extra.merge(direct[series].drop_duplicates(), on=series).sort_values("timestamp")  # series compared
    before = pd.merge_asof(extra, near, on="timestamp", by=series, allow_exact_matches=False)
    assert ((before["timestamp"] - before["near_t"] <= 300) & (before["value"] == before["near_v"])).all()
    # The noise's missed scrapes are gaps the backfill left as the series frame did (a sample follows).
    after = pd.merge_asof(extra, near, on="timestamp", by=series, allow_exact_matches=False, direction="forward")
    assert after["near_t"].notna().any()


def test_only_the_chosen_metrics_and_several_promtool_runs(prometheus):
    prom, proc = prometheus
    names = set(__import__("json").loads(http_get(f"{prom.url}/api/v1/label/__name__/values")[1])["data"])
    assert names and names <= set(INPUT_METRICS)
    assert "lockstep_gpu_power_watts" not in names and "lockstep_pdu_power_watts" not in names
    runs = int(proc.stdout.split(" promtool run")[0].rsplit("(", 1)[1])
    samples = int(proc.stdout.split(" samples")[0].rsplit(" ", 1)[1].replace(",", ""))
    assert runs >= samples // PER_FILE > 1   # files handed over at the limit, not the whole text at once
    blocks = [p for p in (Path(prom.workdir) / "data").iterdir() if (p / "meta.json").exists()]
    assert len(blocks) == runs


def test_end_now_puts_the_last_sample_at_the_end(tmp_path):
    proc = backfill(tmp_path / "data", "--days", "0.01", "--end", "2026-05-01T12:00:00Z", "--metrics",
                    "lockstep_pdu_power_watts")
    assert proc.returncode == 0, proc.stderr
    assert "2026-05-01 12:00:00 UTC" in proc.stdout and "(2026-05-01 11:45:40 UTC to" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["--days", "0"], "--days and --step must be positive"),
    (["--days", "1", "--step", "nan"], "--days and --step must be positive"),
    (["--days", "1", "--metrics", "reports"], "unknown metric set 'reports'"),
    (["--days", "1", "--start", "yesterday"], "--start 'yesterday': want 'now', Unix seconds or an RFC 3339 time"),
    (["--days", "1", "--end", "2026-03-01T00:00:00"], "--end '2026-03-01T00:00:00': an RFC 3339 time needs its zone"),
])
def test_bad_options_are_clear_errors(tmp_path, args, message):
    proc = backfill(tmp_path / "data", *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert not (tmp_path / "data").exists()


def test_without_promtool_it_says_which_package(tmp_path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "backfill", str(SCENARIO), "--days", "0.001",
                           "--out", str(tmp_path / "data")], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 2 and "promtool not found" in proc.stderr and "apt-get install prometheus" in proc.stderr
