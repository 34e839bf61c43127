"""VictoriaMetrics as a second real backend, in the deployment topology: Prometheus scrapes a live
simulated cluster and remote_writes everything into VictoriaMetrics. The analytics service and the
monthly report, pointed at VictoriaMetrics' Prometheus-compatible query API unchanged, give the same
scores and the same report tables as pointed at Prometheus. So does a month of history moved out of
Prometheus' TSDB with vmctl (a migration), whose report has known answers (tests/helpers/report_month.py).
"""
from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import pytest
import yaml

from lockstep import localcluster as lc
from lockstep.analytics.service.app import create_app
from lockstep.analytics.service.config import ServiceConfig
from lockstep.analytics.service.keys import REFRESHED, STATE
from lockstep.stack import (
    Stack,
    http_get,
    query,
    remote_write_to,
    start_prometheus,
    start_victoria_metrics,
    vmctl_from_prometheus,
    wait_on,
)
from tests.helpers import report_month as month
from tests.helpers.paths import FIXTURES, REPO

pytestmark = [pytest.mark.integration, pytest.mark.long(120)]

SCENARIO = FIXTURES / "analytics/victoriametrics.yaml"
JOB, THROTTLED = "6100", ("node01", "5")
DURATION_S = yaml.safe_load(SCENARIO.read_text())["duration_s"]
SPEED = 5.0                  # 310 simulated seconds in 62 s, one tick (and one scrape) a second
STARTUP_S = 120.0            # the stack starting on a loaded 2-core machine
# VictoriaMetrics holds the newest 30 s back from range queries by default (-search.latencyOffset),
# for samples still on their way; the comparison waits for remote_write to deliver them anyway.
VM_ARGS = ["-search.latencyOffset=1s"]


@dataclass(frozen=True)
class Backends:
    prometheus: str
    victoria: str
    start: float        # wall clock: the first tick of the run
    end: float          # the last
    tick: float


def _value(url: str, promql: str, at: float) -> float | None:
    result = query(url, promql, at)
    return float(result[0]["value"][1]) if result else None


def _samples(url: str, names: list[str], at: float) -> dict[str, float | None]:
    """How many samples of each metric the hour before ``at`` holds."""
    return {name: _value(url, f"sum(count_over_time({name}[1h]))", at) for name in names}


def _names(url: str) -> list[str]:
    return [n for n in json.loads(http_get(f"{url}/api/v1/label/__name__/values")[1])["data"] if n.startswith("lockstep_")]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The run, scraped by Prometheus (the analytics service too), remote_written to VictoriaMetrics;
    once it is over, every scraped process stops (Prometheus marks their series stale) and both
    backends hold the same samples."""
    work = tmp_path_factory.mktemp("victoriametrics")
    with Stack() as stack:
        vm = stack.add(start_victoria_metrics(work / "vm", extra_args=VM_ARGS))
        root = work / "root"
        sim = lc.start_sim(SCENARIO, root, stack, speed=SPEED)
        cluster = json.loads((root / "cluster.json").read_text())
        start, tick = cluster["start_timestamp"], cluster["sample_period_s"] / SPEED
        agents = lc.start_node_agents(root, stack)
        power = lc.start_power_exporter(root / "power-exporter.yaml", stack)
        config = lc.prometheus_config({n: lc.host_port(a) for n, a in agents.items()},
                                      power_target=lc.host_port(power), scrape_interval=f"{round(tick * 1000)}ms")
        config["remote_write"] = [remote_write_to(vm)]
        prom = stack.add(start_prometheus(config, work / "prom"))
        # a run of 62 s, stopped while its job still runs: every sample booked at once
        analytics = lc.start_analytics(prom, config, work / "logs", stack, f"--step={tick:g}", "--interval=2",
                                       "--window=120", "--book-after=0", ready_path="/-/healthy")
        services = [sim, prom, vm, power, analytics, *agents.values()]
        wait_on(lambda: not sim.alive(), STARTUP_S + DURATION_S / SPEED, "the simulation to end", services)
        assert sim.proc.returncode == 0, sim.log_tail()
        # on a loaded machine the service can lag the run: what it books of the job's imbalance is in before it stops
        # (a few seconds after the run alone; over 60 s once, with CI's other suites beside it)
        wait_on(lambda: (_value(prom.url, "sum(lockstep_job_imbalance_lost_gpu_seconds_total)", time.time()) or 0) > 0,
                180, "the analytics service to book the job's imbalance", services)
        end = start + DURATION_S / SPEED
        for service in (analytics, power, *agents.values()):
            service.stop()
        wait_on(lambda: _value(prom.url, "sum(up)", time.time()) == 0, 30, "every target down", services)
        time.sleep(2 * tick)   # a scrape after the last failed one: every series is marked stale
        frozen = time.time()
        names = _names(prom.url)
        wait_on(lambda: _samples(vm.url, names, frozen) == _samples(prom.url, names, frozen), 60,
              "VictoriaMetrics to hold every sample Prometheus scraped", services)
        yield Backends(prom.url, vm.url, start, end, tick)


def test_victoriametrics_holds_the_series_prometheus_scraped(live):
    """The same metric names and, at the run's last tick, the same series of each."""
    assert _names(live.victoria) == _names(live.prometheus)
    series = [{r["metric"]["__name__"]: r["value"][1] for r in query(url, 'count by (__name__) ({__name__=~"lockstep_.+"})',
                                                                     live.end)} for url in (live.prometheus, live.victoria)]
    assert series[0] == series[1]
    assert {"lockstep_gpu_job_info", "lockstep_pdu_power_watts", "lockstep_job_lost_gpu_seconds_total"} <= set(series[0])


async def _scored(url: str, live: Backends, aiohttp_client) -> dict:
    """The service's view of the job over the whole run, refreshed once at its last tick (each sample
    booked at once: the run is over)."""
    config = ServiceConfig(prometheus_url=url, interval_s=30.0, window_s=live.end - live.start, step_s=live.tick,
                           timeout_s=20.0, now=lambda: live.end, book_after_s=0.0)
    app = create_app(config)
    client = await aiohttp_client(app)
    await asyncio.wait_for(app[REFRESHED].wait(), 60)
    assert app[STATE].health.up, app[STATE].health.last_error
    answer = await (await client.get(f"/api/v1/jobs/{JOB}")).json()
    assert answer["status"] == "success", answer
    return answer["data"]


async def test_the_service_scores_the_same_from_either_backend(live, aiohttp_client):
    from_prometheus = await _scored(live.prometheus, live, aiohttp_client)
    from_victoria = await _scored(live.victoria, live, aiohttp_client)
    assert from_victoria == from_prometheus
    # ...and what they agree on is a real finding: the throttled GPU, checkpoint losses
    assert [(s["node"], s["gpu"]) for s in from_prometheus["stragglers"]] == [THROTTLED]
    assert from_prometheus["loss"]["lost_gpu_seconds"]["checkpoint"] > 0


def _report(url: str, month_: str, out: Path, *args: str) -> Path:
    """``--cluster`` names the series without a cluster label, as a Prometheus' own TSDB holds them;
    on their way to VictoriaMetrics they got the Prometheus' external label (``sim``, see
    ``localcluster.prometheus_config``), which the report reads where present."""
    proc = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", url,
                           "--month", month_, "--out", str(out), "--cluster", "sim", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _csv(path: Path) -> pd.DataFrame:
    """A report CSV; an empty section is written as an empty file."""
    return pd.read_csv(path, dtype={"job_id": str}) if path.read_text().strip() else pd.DataFrame()


# Where the data ends is found to the minute, and a month-to-date report's end is the moment it runs:
# the two reports, a few seconds apart, may see the run's last minute in different minutes of the clock.
NOW_DEPENDENT = {"coverage.csv": ["last_data", "days_with_data", "month_covered_pct"]}


def _same_tables(a: Path, b: Path, differing=lambda: "") -> dict[str, pd.DataFrame]:
    """The report CSVs of ``a`` and ``b``, the same; where one differs, ``differing()`` says how the
    backends' series behind it differ."""
    names = sorted(p.name for p in a.glob("*.csv"))
    assert names == sorted(p.name for p in b.glob("*.csv")) and names
    tables = {}
    for name in names:
        left, right = (_csv(d / name) for d in (a, b))
        ends = [pd.Timestamp(t.loc[0, "last_data"]) for t in (left, right)] if name in NOW_DEPENDENT else []
        assert not ends or abs(ends[0] - ends[1]) <= pd.Timedelta(minutes=1), ends
        drop = NOW_DEPENDENT.get(name, [])
        try:
            pd.testing.assert_frame_equal(left.drop(columns=drop), right.drop(columns=drop), check_exact=False,
                                          rtol=1e-9, obj=name)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{differing()}") from None
        tables[name] = left
    return tables


COUNTERS = ("lockstep_job_ledger_gpu_seconds_total", "lockstep_job_lost_gpu_seconds_total")


def _range(url: str, promql: str, start: float, end: float) -> dict[tuple, dict[int, float]]:
    """A range query at 1 s steps (the report's, for a run of minutes): each series' values by time, by its
    labels but ``cluster`` (the external label VictoriaMetrics' copies carry)."""
    params = urlencode({"query": promql, "start": f"{start:.0f}", "end": f"{end:.0f}", "step": "1"})
    answer = json.loads(http_get(f"{url}/api/v1/query_range?{params}", timeout=30)[1])
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "cluster")):
            {int(t): float(v) for t, v in r["values"]} for r in answer["data"]["result"]}


def _differing_series(live: Backends) -> str:
    """The report's counters as each backend answers them, series by series, where they differ (a point
    one has and the other has not, or values apart by more than VictoriaMetrics' rounding)."""
    out = []
    for name in COUNTERS:
        answers = [_range(url, name, live.start - 60, time.time()) for url in (live.prometheus, live.victoria)]
        for labels in sorted(answers[0].keys() | answers[1].keys()):
            points = [a.get(labels, {}) for a in answers]
            apart = sorted(t for t in points[0].keys() | points[1].keys()
                           if not math.isclose(points[0].get(t, math.inf), points[1].get(t, -math.inf), rel_tol=1e-9))
            if apart:
                out.append(f"{dict(labels)} at {apart[:20]}:\n  prometheus {[points[0].get(t) for t in apart[:20]]}"
                           f"\n  victoria   {[points[1].get(t) for t in apart[:20]]}")
    return "the series behind the reports, where the backends differ:\n" + ("\n".join(out) or "none")


def test_the_monthly_report_is_the_same_from_either_backend(live, tmp_path):
    month_ = time.strftime("%Y-%m", time.gmtime(live.start))
    tables = _same_tables(_report(live.prometheus, month_, tmp_path / "prometheus"),
                          _report(live.victoria, month_, tmp_path / "victoria"), lambda: _differing_series(live))
    # every section has something to compare, but the look-ahead: a live run of minutes holds no whole day, and a
    # forecast needs a week of them (it says nothing rather than guess, from either backend)
    ahead = {"demand_forecast.csv", "power_forecast.csv", "failure_forecast.csv", "forecast_daily.csv"}
    assert all(tables[n].empty for n in ahead)
    assert all(not t.empty for n, t in tables.items() if n not in ahead), [n for n, t in tables.items() if t.empty]
    assert tables["gpu_hours_by_job.csv"]["job_id"].tolist() == [JOB]
    assert ("node00", "gpu 2", "xid 48") in set(zip(*(tables["recurring_faults.csv"][c] for c in
                                                      ("node", "component", "kind"))))
    assert tables["checkpoint_cost.csv"]["checkpoints"].tolist() == [1]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """A month of history (tests/helpers/report_month.py) in Prometheus' TSDB, and copied into VictoriaMetrics."""
    work = tmp_path_factory.mktemp("vm-month")
    data = lc.backfill(month.frame(), work / "prom", max_block_duration="744h")
    with Stack() as stack:
        # No response cache: every report query reads the imported samples themselves; samples that a
        # second run of vmctl imports again collapse into one (see vmctl_from_prometheus).
        vm = stack.add(start_victoria_metrics(work / "vm", extra_args=["-search.disableCache",
                                                                       "-dedup.minScrapeInterval=1ms"]))
        imported = vmctl_from_prometheus(data, vm)
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}}, work / "prom"))
        # It holds every sample of every series the TSDB holds, no more.
        after = month.START + (month.DAYS + 1) * 86400
        names = _names(prom.url)

        def counts(url: str) -> dict[str, float | None]:
            return {n: _value(url, f"sum(count_over_time({n}[{month.DAYS + 2}d]))", after) for n in names}

        expected, held = counts(prom.url), {}

        def complete() -> bool:
            held.update(counts(vm.url))
            return held == expected
        wait_on(complete, 60, lambda: "VictoriaMetrics to hold the migrated month (held, expected): "
              f"{ {n: (held.get(n), c) for n, c in expected.items() if held.get(n) != c} }\nvmctl: {imported[-2000:]}",
              [prom, vm])
        yield prom.url, vm.url


def test_a_migrated_month_reports_the_same_known_answers(migrated, tmp_path):
    prometheus, victoria = migrated
    tables = _same_tables(_report(prometheus, "2026-10", tmp_path / "prometheus"),
                          _report(victoria, "2026-10", tmp_path / "victoria"))
    jobs = tables["gpu_hours_by_job.csv"].set_index("job_id")
    for job, hours in month.EXPECTED["allocated"].items():
        assert jobs.loc[job, "allocated_gpu_h"] == pytest.approx(hours, rel=1e-3)
    ckpt = tables["checkpoint_cost.csv"].set_index("job_id")
    assert ckpt.loc["100", "checkpoints"] == month.EXPECTED["checkpoints"]
    assert ckpt.loc["100", "observed_write_gb_s"] == pytest.approx(month.EXPECTED["observed_gb_s"], rel=0.05)
