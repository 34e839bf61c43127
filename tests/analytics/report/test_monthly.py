"""``lockstep report monthly`` against a real Prometheus holding a backfilled month (tests/helpers/report_month.py)."""
from __future__ import annotations

import base64
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lockstep import stack as st
from lockstep.localcluster import backfill
from tests.helpers import report_month as month
from tests.helpers.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.long(70)]

ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    work = tmp_path_factory.mktemp("report")
    backfill(month.frame(), work / "prom", max_block_duration="744h")
    with st.Stack() as stack:
        prom = stack.add(st.start_prometheus({"global": {"scrape_interval": "15s"}}, work / "prom"))
        teams = work / "teams.csv"
        teams.write_text("job_id,team\n100,llm-pretrain\n")
        out = work / "out"
        proc = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", prom.url,
                               "--month", "2026-10", "--out", str(out), "--fine-step", str(month.PERIOD),
                               "--cluster", "test", "--teams", str(teams)],
                              capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def csv(out: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(out / name, dtype={"job_id": str})


def test_gpu_hours_per_job_and_cause(report):
    out, _ = report
    jobs = csv(out, "gpu_hours_by_job.csv").set_index("job_id")
    for job, hours in month.EXPECTED["allocated"].items():
        assert jobs.loc[job, "allocated_gpu_h"] == pytest.approx(hours, rel=1e-3)
        assert jobs.loc[job, "cluster"] == "test"
    assert jobs.loc["100", "lost_checkpoint_gpu_h"] == pytest.approx(month.EXPECTED["lost_checkpoint_h"]["100"], rel=1e-3)
    # The straggler counter reset mid-month (analytics restart): counted, except what accrued between
    # the last hourly point before the reset and the reset itself (at most one step at the counter's rate).
    straggler, one_step_h = month.EXPECTED["lost_straggler_h"]["100"], month.STRAGGLER_RATE * 3600 / 3600
    assert straggler - one_step_h <= jobs.loc["100", "lost_straggler_gpu_h"] <= straggler + 1e-9
    assert jobs.loc["200", "lost_gpu_h"] == 0
    lost = month.EXPECTED["lost_checkpoint_h"]["100"] + month.EXPECTED["lost_straggler_h"]["100"]
    assert jobs.loc["100", "productive_gpu_h"] == pytest.approx(2976.0 - lost, abs=one_step_h)
    # job 100 is mapped by --teams; job 200 falls back to its Slurm user from lockstep_gpu_job_info
    assert (jobs.loc["100", "team"], jobs.loc["200", "team"]) == ("llm-pretrain", "bob")
    teams = csv(out, "gpu_hours_by_team.csv").set_index("team")
    assert teams.loc["bob", "allocated_gpu_h"] == pytest.approx(480.0, rel=1e-3) and teams.loc["bob", "jobs"] == 1
    clusters = csv(out, "gpu_hours_by_cluster.csv")
    assert clusters["allocated_gpu_h"].tolist() == pytest.approx([2976.0 + 480.0], rel=1e-3)


def test_imbalance_per_job_apart_from_the_lost_hours(report):
    out, _ = report
    imb = csv(out, "imbalance_by_job.csv").set_index("job_id")
    assert list(imb.index) == ["100"]          # job 200 has none
    waited = month.EXPECTED["imbalance_h"]["100"]
    assert imb.loc["100", "waited_gpu_h"] == pytest.approx(waited, rel=1e-3)
    assert imb.loc["100", "share_of_allocated"] == pytest.approx(waited / month.EXPECTED["allocated"]["100"], rel=1e-3)
    assert (imb.loc["100", "slow_gpus"], imb.loc["100", "slowest_ratio"]) == (1, pytest.approx(1.12))
    assert "imbalance_gpu_h" not in csv(out, "gpu_hours_by_job.csv").columns   # not a loss cause
    assert "href='imbalance_by_job.csv'" in (out / "report-2026-10.html").read_text()


def test_rack_energy_peak_and_headroom(report):
    out, _ = report
    racks = csv(out, "rack_energy.csv").set_index("rack")
    for rack in ("r1", "r2"):
        assert racks.loc[rack, "energy_kwh"] == pytest.approx(month.EXPECTED["kwh"][rack], rel=1e-3)
        assert racks.loc[rack, "peak_w"] == pytest.approx(month.EXPECTED["peak_w"][rack])
        budget = month.EXPECTED["budget_w"][rack]
        headroom = 100 * (budget - month.EXPECTED["peak_w"][rack]) / budget
        assert racks.loc[rack, "headroom_pct"] == pytest.approx(headroom)
    assert list(racks.index) == ["r2", "r1"]  # lowest headroom first
    daily = csv(out, "rack_energy_daily.csv")
    assert len(daily) == 31 and daily["r1"].iloc[:30].tolist() == pytest.approx([480.0] * 30, rel=1e-3)


def test_recurring_faults_ranked(report):
    out, _ = report
    faults = csv(out, "recurring_faults.csv")
    order = list(zip(faults["node"], faults["component"], faults["kind"]))
    assert order == month.EXPECTED["fault_order"]  # the idle GPU (reason gpu_idle) is not throttling
    assert faults["days_with_events"].tolist() == [5, 3, 2, 1]
    assert faults["events"].tolist() == pytest.approx([month.EXPECTED["throttle_h"], 3, 3, 500], rel=0.02)


def test_checkpoint_cost(report):
    out, _ = report
    ckpt = csv(out, "checkpoint_cost.csv").set_index("job_id")
    assert ckpt.loc["100", "checkpoints"] == month.EXPECTED["checkpoints"]
    assert ckpt.loc["100", "mean_blocked_s"] == pytest.approx(month.EXPECTED["blocked_s"])
    assert ckpt.loc["100", "observed_write_gb_s"] == pytest.approx(month.EXPECTED["observed_gb_s"], rel=0.05)
    assert ckpt.loc["100", "bandwidth_to_halve_gb_s"] == pytest.approx(2 * month.EXPECTED["observed_gb_s"], rel=0.05)
    assert ckpt.loc["100", "source"] == "stalls"     # no measured checkpoints: estimated from its stalls


def test_checkpoint_cost_reads_the_measured_checkpoints(report):
    """A job whose checkpoints the analytics service measured is reported by those figures."""
    out, _ = report
    ckpt = csv(out, "checkpoint_cost.csv").set_index("job_id")
    want = month.EXPECTED["measured"]
    assert ckpt.loc["200", "source"] == "measured"
    assert ckpt.loc["200", "checkpoints"] == want["checkpoints"]
    assert ckpt.loc["200", "mean_blocked_s"] == pytest.approx(want["mean_s"])
    assert ckpt.loc["200", "mean_write_gb"] == pytest.approx(want["mean_gb"])
    assert ckpt.loc["200", "observed_write_gb_s"] == pytest.approx(want["gb_s"])


def test_forecast_of_demand_power_and_failures(report):
    """The month's 31 whole days: the trend is the least-squares slope of the daily series the month
    was built from (numpy here, scikit-learn in the report), within its interval; demand falls, so it
    never fills the 6 GPUs; failures per 1,000 GPU-days beside the Llama 3 paper's."""
    out, _ = report
    days = np.arange(month.DAYS)
    demand = csv(out, "demand_forecast.csv").iloc[0]
    observed = month.EXPECTED["demand_gpu_h_per_day"]
    slope = np.polyfit(days, observed, 1)[0]
    assert (demand["cluster"], demand["days"], demand["gpus"]) == ("test", month.DAYS, month.EXPECTED["gpus"])
    assert demand["capacity_gpu_h_per_day"] == 24 * month.EXPECTED["gpus"]
    assert demand["trend_per_day"] == pytest.approx(slope, rel=1e-3) and slope < 0
    assert demand["trend_lo"] <= slope <= demand["trend_hi"]
    assert demand["day90_lo"] <= demand["day90"] <= demand["day90_hi"]
    assert demand["capacity_full"] == "not within 90 days"
    assert 0 <= demand["backtest_coverage"] <= 1 and demand["backtest_mae"] >= 0
    power = csv(out, "power_forecast.csv").set_index("rack")
    for rack, peaks in month.EXPECTED["peak_w_per_day"].items():
        assert power.loc[rack, "peak_w"] == max(peaks) and power.loc[rack, "budget_w"] == month.EXPECTED["budget_w"][rack]
        assert power.loc[rack, "trend_per_day"] == pytest.approx(np.polyfit(days, peaks, 1)[0], abs=1e-6 * max(peaks))
    failures = csv(out, "failure_forecast.csv").set_index("component")
    gpu_days = month.EXPECTED["gpus"] * month.DAYS
    for component, events in month.EXPECTED["failures"].items():
        assert failures.loc[component, "events"] == events and failures.loc[component, "gpu_days"] == gpu_days
        assert failures.loc[component, "per_1000_gpu_days"] == pytest.approx(1000 * events / gpu_days)
    llama = {"gpu": 148 + 19 + 17, "gpu memory": 72, "network": 35}   # Table 5, 16,384 GPUs over 54 days
    for component, n in llama.items():
        assert failures.loc[component, "prior_per_1000_gpu_days"] == pytest.approx(1000 * n / (16384 * 54))
    assert (failures["next_90d_lo"] <= failures["next_90d_events"]).all()
    daily = csv(out, "forecast_daily.csv")
    seen = daily[(daily["series"] == "demand_gpu_h") & daily["observed"].notna()]
    assert seen["observed"].tolist() == pytest.approx(observed)
    ahead = daily[(daily["series"] == "demand_gpu_h") & daily["forecast"].notna()]
    assert len(ahead) == 90 and ahead["date"].iloc[0] == "2026-11-01"
    page = (out / "report-2026-10.html").read_text()
    for name in ("demand_forecast.csv", "power_forecast.csv", "failure_forecast.csv", "field_priors.csv"):
        assert f"href='{name}'" in page
    assert "arXiv:2407.21783" in page


def test_html_is_self_contained_with_plots_and_progress(report):
    out, proc = report
    page = (out / "report-2026-10.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 6   # with demand and rack power ahead
    assert all(base64.b64decode(img).startswith(b"\x89PNG\r\n") for img in images)
    assert not re.search(r"<script|<link|src=['\"]https?:", page)  # nothing fetched from elsewhere
    assert re.search(r"\[#{30}\] (\d+)/\1 ", proc.stderr)  # the progress bar reached its end
    for name in ("gpu_hours_by_team.csv", "recurring_faults.csv", "checkpoint_cost.csv"):
        assert f"href='{name}'" in page and (out / name).exists()


def test_html_renders_in_headless_chromium(report):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or st.require_binary("chromium")
    out, _ = report
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-2026-10.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,2400", (out / "report-2026-10.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    from PIL import Image
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 22)
    inked = sum(n for n, rgb in colours if min(rgb) < 200)
    # A blank or broken page is (nearly) one colour; bars, lines and tables in several colours ink the page.
    assert len(colours) > 50 and inked > 0.05 * image.width * image.height


def test_bad_month_and_unreachable_prometheus_are_clear_errors(tmp_path, refused_port):
    bad = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url",
                          "http://127.0.0.1:9", "--month", "2026-13", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "--month '2026-13': expected YYYY-MM" in bad.stderr
    down = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url",
                           f"http://127.0.0.1:{refused_port}", "--month", "2026-10", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
    # a flag is exit 2, Prometheus that cannot be read exit 1: one line either way
    assert down.returncode == 1 and "cannot reach Prometheus" in down.stderr
    assert len(down.stderr.splitlines()) == 1 and len(bad.stderr.splitlines()) == 1


def test_report_on_a_simulated_series(tmp_path):
    """The simulator's own series (scenario xid.yaml: XID 48 then 79 on node03 GPU 6), backfilled:
    energy and peak per rack equal what the frame itself holds, and both XIDs are ranked."""
    parquet = tmp_path / "xid.parquet"
    subprocess.run([sys.executable, "-m", "lockstep", "sim", "series", str(REPO / "simulator/scenarios/xid.yaml"),
                    "--out", str(parquet)], check=True, capture_output=True, cwd=REPO)
    frame = pd.read_parquet(parquet)
    backfill(frame, tmp_path / "prom")
    start = pd.Timestamp(frame["timestamp"].min(), unit="s", tz="UTC")
    with st.Stack() as stack:
        prom = stack.add(st.start_prometheus({"global": {"scrape_interval": "15s"}}, tmp_path / "prom"))
        proc = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", prom.url,
                               "--month", start.strftime("%Y-%m"), "--out", str(tmp_path / "out"),
                               "--step", "300", "--fine-step", "5"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    energy = frame[frame["metric"] == "lockstep_pdu_energy_joules_total"]
    kwh = energy.groupby(["rack", "pdu"], observed=True)["value"].agg(lambda v: v.iloc[-1] - v.iloc[0])
    power = frame[frame["metric"] == "lockstep_pdu_power_watts"]
    peak = power.groupby(["timestamp", "rack"], observed=True)["value"].sum().groupby("rack", observed=True).max()
    racks = csv(tmp_path / "out", "rack_energy.csv").set_index("rack")
    assert sorted(racks.index) == sorted(kwh.index.get_level_values("rack").unique())
    for rack in racks.index:
        assert racks.loc[rack, "energy_kwh"] == pytest.approx(kwh.loc[rack].sum() / 3.6e6, rel=1e-6)
        assert racks.loc[rack, "peak_w"] == pytest.approx(peak.loc[rack], rel=1e-6)
    faults = csv(tmp_path / "out", "recurring_faults.csv")
    xids = faults[faults["kind"].str.startswith("xid")]
    assert sorted(zip(xids["node"], xids["component"], xids["kind"], xids["events"])) == [
        ("node03", "gpu 6", "xid 48", 1), ("node03", "gpu 6", "xid 79", 1)]


def _partial_month():
    """Two hours of a September day, sampled every 30 s from 10:00: 4 GPUs of job 300, one 10 kW PDU,
    an XID counter born at 11:00, an ECC counter that had counted 500 before monitoring began, and
    the job's lost checkpoint GPU-seconds growing 0.2 a second from 0."""
    t0, period, n = pd.Timestamp("2026-09-20T10:00Z").timestamp(), 30.0, 240

    def series(metric, labels, value, first=0):
        return [{"metric": metric, "node": "", **labels, "timestamp": t0 + k * period, "value": float(value(k))}
                for k in range(first, n)]
    rows = [r for g in range(4) for r in series("lockstep_gpu_job_info", {"node": "node00", "gpu": str(g),
                                                "uuid": f"GPU-{g}", "job_id": "300", "user": "carol"}, lambda k: 1)]
    rows += series("lockstep_pdu_energy_joules_total", {"pdu": "p1", "rack": "r1"}, lambda k: 7e9 + 10e3 * period * k)
    rows += series("lockstep_pdu_power_watts", {"pdu": "p1", "rack": "r1"}, lambda k: 10e3)
    rows += series("lockstep_rack_power_budget_watts", {"rack": "r1"}, lambda k: 30e3)
    rows += series("lockstep_gpu_xid_errors_total", {"node": "node00", "gpu": "1", "xid": "13"}, lambda k: 1, first=n // 2)
    rows += series("lockstep_gpu_ecc_errors_total", {"node": "node00", "gpu": "2", "type": "corrected"}, lambda k: 500)
    rows += series("lockstep_job_lost_gpu_seconds_total", {"job_id": "300", "cause": "checkpoint"},
                   lambda k: 0.2 * period * k)
    return pd.DataFrame(rows).fillna("")


def test_a_partial_month_is_found_and_reported_at_steps_that_fit_it(tmp_path):
    """Two hours of data in September: the report says so, queries them at minute steps (not hourly:
    two points would be all it had), and counts what happened in them. Sampled figures are exact to
    within one step at either end (a point stands for the step after it)."""
    backfill(_partial_month(), tmp_path / "prom")
    with st.Stack() as stack:
        prom = stack.add(st.start_prometheus({"global": {"scrape_interval": "15s"}}, tmp_path / "prom"))
        proc = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly", "--prometheus-url", prom.url,
                               "--month", "2026-09", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                              cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    covered = csv(out, "coverage.csv").iloc[0]
    assert (covered["first_data"], covered["last_data"]) == ("2026-09-20 10:00 UTC", "2026-09-20 12:00 UTC")
    assert covered["days_with_data"] == pytest.approx(2 / 24, abs=0.001) and not covered["month_to_date"]
    assert covered["month_covered_pct"] == pytest.approx(100 * 2 / (30 * 24), rel=0.01)
    assert (covered["sample_interval_s"], covered["step_s"], covered["fine_step_s"]) == (30, 60, 30)
    step_h = 60 / 3600
    jobs = csv(out, "gpu_hours_by_job.csv").set_index("job_id")
    assert jobs.loc["300", "allocated_gpu_h"] == pytest.approx(4 * 2.0, abs=4 * step_h)
    assert jobs.loc["300", "lost_checkpoint_gpu_h"] == pytest.approx(0.2 * 2.0, abs=0.2 * step_h)
    racks = csv(out, "rack_energy.csv").set_index("rack")
    assert racks.loc["r1", "energy_kwh"] == pytest.approx(10 * 2.0, abs=10 * step_h)
    daily = csv(out, "rack_energy_daily.csv")
    assert daily["day"].tolist() == ["2026-09-20"] and daily["hours_of_data"].tolist() == pytest.approx([2.0], abs=step_h)
    faults = csv(out, "recurring_faults.csv")   # the XID born inside the range; not the ECC count from before it
    assert list(zip(faults["component"], faults["kind"], faults["events"])) == [("gpu 1", "xid 13", 1.0)]
    page = html.unescape((out / "report-2026-09.html").read_text())
    assert ("Data from 2026-09-20 10:00 UTC to 2026-09-20 12:00 UTC: 0.08 of the month's 30 days (0.3 %). "
            "Sampled every 30 s; totals at 60 s steps") in page
