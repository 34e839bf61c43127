"""The demo's history (``lockstep.demo_history``), two days of it on half the demo cluster, in a real
Prometheus: the monthly report has data in every section and its plots render (headless Chromium,
as tests/analytics/report/test_monthly.py checks), the jobs' counters carry over from one job to the next,
and the dashboards' recorded series cover it. ``lockstep demo`` writes the same, over 30 days."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lockstep.demo_history import STEP_S, backfill_month
from lockstep.demo_jobs import JOBS
from lockstep.stack import Stack, query, require_binary, start_prometheus
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

END = pd.Timestamp("2026-10-20T00:00Z").timestamp()   # the two days lie inside October
DAYS = 2.0


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("history")
    cluster = {**yaml.safe_load((REPO / "simulator/scenarios/demo.yaml").read_text())["cluster"], "nodes": 8}
    month, counters = backfill_month(cluster, work / "prometheus", DAYS, END)
    with Stack() as stack:
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}}, work / "prometheus"))
        out = work / "report"
        proc = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", prom.url,
                               "--month", "2026-10", "--out", str(out)], capture_output=True, text=True, cwd=REPO,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        yield prom.url, month, counters, out


def csv(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / name, dtype={"job_id": str})


def test_every_section_of_the_report_has_data(history):
    _, month, _, out = history
    tables = {p.name: pd.read_csv(p) for p in out.glob("*.csv") if p.read_text().strip()}
    ahead = {"demand_forecast.csv", "power_forecast.csv", "failure_forecast.csv", "forecast_daily.csv"}
    assert len(tables) == 15 and all(not t.empty for n, t in tables.items() if n not in ahead), sorted(tables)
    # two days are too few for a trend (a week at least): the forecasts say nothing rather than guess
    assert all(tables[n].empty for n in ahead)
    jobs = csv(out, "gpu_hours_by_job.csv")
    assert sorted(jobs["job_id"]) == sorted(j.job_id for j in JOBS)
    assert set(csv(out, "gpu_hours_by_team.csv")["team"]) == {j.user for j in JOBS}
    # node03's GPU 6 throws XID 48 in three of the jobs; node07's HCA 4 flaps in two; node05's GPU 3
    # runs hot in two
    faults = csv(out, "recurring_faults.csv").set_index(["node", "component", "kind"])
    assert faults.loc[("node03", "gpu 6", "xid 48"), "events"] == 3
    assert faults.loc[("node07", "mlx5_4 port 1", "link flap"), "events"] == 5
    assert faults.loc[("node05", "gpu 3", "throttling (h)"), "events"] > 0
    assert csv(out, "checkpoint_cost.csv")["checkpoints"].sum() > 0
    # carol's job has a heavier pipeline stage: node07's eight GPUs at 0.85 of the others' speed
    imbalance = csv(out, "imbalance_by_job.csv").set_index("job_id")
    assert list(imbalance.index) == ["3122"] and imbalance.loc["3122", "waited_gpu_h"] > 0
    assert (imbalance.loc["3122", "slow_gpus"], imbalance.loc["3122", "slowest_ratio"]) == (8, pytest.approx(1 / 0.85))
    assert month.start >= pd.Timestamp("2026-10-18T00:00Z").timestamp() and month.end == END - STEP_S


def test_counters_run_on_from_job_to_job(history):
    """Rack energy over the two days is rack power times time: no job's start reset a lifetime
    counter (a reset would add the PDU's whole lifetime, tens of MWh)."""
    url, month, counters, out = history
    hours = (month.end - month.start) / 3600
    mean = {r["metric"]["rack"]: float(r["value"][1])
            for r in query(url, f"avg_over_time(lockstep_pdu_power_watts[{int(DAYS * 86400)}s])", month.end)}
    racks = csv(out, "rack_energy.csv").set_index("rack")
    assert sorted(racks.index) == sorted(mean) == ["r1", "r2"]
    for rack, watts in mean.items():
        assert racks.loc[rack, "energy_kwh"] == pytest.approx(watts * hours / 1000, rel=0.02)
    doc = json.loads(counters.read_text())
    assert doc["timestamp"] == month.end and "xid_events" not in doc["counters"]   # live agents count afresh


def test_the_dashboards_recorded_series_cover_the_history(history):
    url, month, _, _ = history
    for record in ("lockstep:rack_power_watts:sum", "lockstep:job_gpus:count", "lockstep:job_lost_gpu_seconds:rate"):
        counts = query(url, f"count_over_time({record}[{int(DAYS * 86400)}s])", month.end)
        assert counts and max(float(r["value"][1]) for r in counts) >= 0.9 * DAYS * 86400 / STEP_S / len(JOBS), record


def test_the_report_renders_in_headless_chromium(history, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or require_binary("chromium")
    out = history[3]
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,2400", (out / "report-2026-10.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image
    page = (out / "report-2026-10.html").read_text()
    assert page.count("src='data:image/png;base64,") == 5     # with the ledger's
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 22)
    assert len(colours) > 50 and sum(n for n, rgb in colours if min(rgb) < 200) > 0.05 * image.width * image.height


def test_the_fleet_row_reads_its_recorded_series_over_the_history(history):
    """The fleet row from the backfilled history: every GPU counted in one state, free capacity, and the
    hourly hardware-event windows."""
    from lockstep.alerts.recording import FLEET_FREE_GPUS, FLEET_GPU_EVENTS, FLEET_GPUS, FLEET_INTERVAL, FLEET_NODES
    url, month, _, _ = history
    cluster = yaml.safe_load((REPO / "simulator/scenarios/demo.yaml").read_text())["cluster"]
    gpus = query(url, f"sum by (state) ({FLEET_GPUS})", month.end)
    assert sum(float(r["value"][1]) for r in gpus) == 8 * cluster["gpus_per_node"]
    nodes = query(url, f"sum({FLEET_NODES})", month.end)
    assert nodes and float(nodes[0]["value"][1]) == 8
    assert query(url, f"sum({FLEET_FREE_GPUS})", month.end)
    span = query(url, f"count_over_time({FLEET_GPUS}[{int(DAYS * 86400)}s])", month.end)
    assert span and max(float(r["value"][1]) for r in span) >= 0.9 * DAYS * 86400 / STEP_S
    # evaluated hourly: read over the last hour; only GPUs whose counters the history holds (XIDs) have one
    events = query(url, f'last_over_time({FLEET_GPU_EVENTS}{{window="30d"}}[{FLEET_INTERVAL}])', month.end)
    assert events and all(float(r["value"][1]) >= 0 for r in events)
