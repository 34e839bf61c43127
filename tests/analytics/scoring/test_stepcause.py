"""The step-time scorer with the same ranks' telemetry: its results stay, each finding gains its cause.

The real PAI job (tests/fixtures/pai/README.md: workers 6-9 slow down from iteration ~2,160, 0-1 run
~10% slow from the first record) with telemetry written here, so the hardware each worker shows is
the test's own: where it explains a slowness the cause is hardware, where it shows nothing the cause
is the pace's (transient for a straggler, work for imbalance).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lockstep.analytics.scoring.stepcause import parse_telemetry
from lockstep.analytics.scoring.steptimes import parse_csv, result
from lockstep.cli import main
from lockstep.exporters.toolkit.configfile import ConfigError
from tests.helpers.paths import FIXTURES

PAI = FIXTURES / "pai/job_3_norm.csv"
LATE, EARLY = ("6", "7", "8", "9"), ("0", "1")


def telemetry(path: Path, hot_late: bool = False, narrow_early: bool = False) -> Path:
    """A sample every 50 iterations per worker: clocks at max and 70 C; with ``hot_late`` workers 6-9
    hold thermal and hardware slowdowns at 0.8x clock from iteration 2,150 on; with ``narrow_early``
    workers 0-1 run on a narrower PCIe link from the start."""
    lines = ["worker,step,clock_ratio,temperature_celsius,reasons,pcie_degraded"]
    for step in range(0, 2500, 50):
        for w in range(10):
            hot = hot_late and str(w) in LATE and step >= 2150
            narrow = narrow_early and str(w) in EARLY
            lines.append(f"{w},{step},{0.8 if hot else 1.0},{90 if hot else 70},"
                         f"{'hw_slowdown;sw_thermal_slowdown' if hot else 'sw_power_cap'},{int(narrow)}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def steps():
    return parse_csv(PAI)


def _plain(rows):
    return [{k: v for k, v in r.items() if k in ("worker", "first_flagged_step", "score")} for r in rows]


def test_without_telemetry_the_results_are_the_step_time_scorers(steps):
    assert result(steps, None) == result(steps) == result(steps, pd.DataFrame())


def test_hardware_that_explains_the_late_slowdown_is_the_stragglers_cause(steps, tmp_path):
    plain, found = result(steps), result(steps, parse_telemetry(telemetry(tmp_path / "hw.csv", hot_late=True)))
    assert _plain(found["stragglers"]) == _plain(plain["stragglers"])       # the same findings...
    assert {s["worker"]: s["cause"] for s in found["stragglers"]} == dict.fromkeys(LATE, "hardware")
    for s in found["stragglers"]:
        assert "clock_event_reasons" in s["evidence"]["cause"]["explained_by"]
    (imb,) = found["imbalance"]                                               # ...and the early pair: work
    assert {r["worker"]: r["cause"] for r in imb["ranks"]} == dict.fromkeys(EARLY, "work") and imb["cause"] == "work"
    assert imb["lost_share"] == plain["imbalance"][0]["lost_share"]


def test_no_hardware_evidence_leaves_the_pace_as_the_cause(steps, tmp_path):
    found = result(steps, parse_telemetry(telemetry(tmp_path / "hw.csv")))
    assert {s["cause"] for s in found["stragglers"]} == {"transient"}
    assert {r["cause"] for imb in found["imbalance"] for r in imb["ranks"]} == {"work"}


def test_workers_slow_since_the_start_on_a_narrow_link_are_hardware_stragglers(steps, tmp_path):
    found = result(steps, parse_telemetry(telemetry(tmp_path / "hw.csv", narrow_early=True)))
    early = [s for s in found["stragglers"] if s.get("since_start")]
    assert {s["worker"] for s in early} == set(EARLY)
    assert all(s["cause"] == "hardware" and s["evidence"]["cause"]["explained_by"] == ["pcie_link_degraded"]
               for s in early)
    assert all(0.85 <= s["score"] <= 0.95 for s in early)        # ~10% slow (README)
    assert found["imbalance"] == []


def test_cli_takes_the_telemetry_file(tmp_path, capsys):
    hw = telemetry(tmp_path / "hw.csv", hot_late=True)
    assert main(["analytics", "steptimes", str(PAI), "--telemetry", str(hw), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {s["cause"] for s in out["stragglers"]} == {"hardware"}
    assert main(["analytics", "steptimes", str(PAI), "--telemetry", str(hw)]) == 0
    assert "worker 6: first flagged" in capsys.readouterr().out


def test_a_bad_telemetry_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("worker,step,reasons\n0,1,hw_melting\n")
    with pytest.raises(ConfigError, match="bad.csv:2: reasons: unknown clock-event reason 'hw_melting'"):
        parse_telemetry(bad)
    bad.write_text("rank,step\n")
    with pytest.raises(ConfigError, match=":1: header"):
        parse_telemetry(bad)
