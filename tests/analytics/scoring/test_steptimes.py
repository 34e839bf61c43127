"""``lockstep analytics steptimes``: per-rank step times with known slow workers, the three shapes of
real jobs where a naive "best ranks" reference flags healthy workers, and a real PAI job.

The synthetic step times are generated here: the slow workers, the steps they slow down from and
how much are the ground truth (never the scorer's output). The PAI job's expectations are read off
the file (tests/fixtures/pai/README.md).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.scoring.steptimes import parse_csv, result, stragglers
from lockstep.cli import main
from lockstep.exporters.toolkit.configfile import ConfigError
from tests.helpers.paths import FIXTURES

SLOW_WORKER, SLOW_FROM, SLOWDOWN = "6", 2100, 1.3


def write_csv(path, workers=16, steps=3000, slow=True, seed=4, jitter=0.03):
    rng = np.random.default_rng(seed)
    lines = ["worker,step,seconds"]
    for step in range(steps):
        times = 1.5 * rng.normal(1.0, jitter, workers)
        if slow and step >= SLOW_FROM:
            times[int(SLOW_WORKER)] *= SLOWDOWN
        lines += [f"{w},{step},{t:.5f}" for w, t in enumerate(times)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_slow_worker_flagged_from_its_step(tmp_path):
    found = stragglers(parse_csv(write_csv(tmp_path / "steps.csv")))
    assert [s["worker"] for s in found] == [SLOW_WORKER]
    assert SLOW_FROM <= found[0]["first_flagged_step"] <= SLOW_FROM + 10
    assert found[0]["score"] == pytest.approx(1 / SLOWDOWN, abs=0.03)  # speed relative to the best ranks


def test_healthy_run_flags_nobody(tmp_path):
    assert stragglers(parse_csv(write_csv(tmp_path / "steps.csv", slow=False, jitter=0.05))) == []


def test_cli_json_contract(tmp_path, capsys):
    assert main(["analytics", "steptimes", str(write_csv(tmp_path / "steps.csv")), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["stragglers", "imbalance"]
    (s,) = out["stragglers"]
    assert set(s) == {"worker", "first_flagged_step", "score", "evidence"} and s["worker"] == SLOW_WORKER
    assert isinstance(s["first_flagged_step"], int) and isinstance(s["score"], float)
    step = s["evidence"]["signals"]["step_seconds"]
    assert step["change"] >= step["bar"] > 1.0 and step["usual_ratio"] == pytest.approx(1.0, abs=0.05)
    assert out["imbalance"] == []          # 16 identical workers


PAI = FIXTURES / "pai/job_3_norm.csv"


def test_real_pai_job_stragglers_late_and_imbalance_from_the_start(capsys):
    """Workers 6-9 slow down from iteration ~2,160 on; 0-1 run ~10% slow from the first record; 2-5
    never change (README next to the file)."""
    found = result(parse_csv(PAI))
    flagged = {s["worker"]: s["first_flagged_step"] for s in found["stragglers"]}
    assert set(flagged) == {"6", "7", "8", "9"}
    assert all(step >= 2000 for step in flagged.values()), flagged
    (imb,) = found["imbalance"]
    ranks = {r["worker"]: r["ratio"] for r in imb["ranks"]}
    assert set(ranks) == {"0", "1"} and all(1.05 <= r <= 1.15 for r in ranks.values()), ranks
    assert 0.05 <= imb["lost_share"] <= 0.12     # 8 of 10 workers wait ~9% of each step
    assert main(["analytics", "steptimes", str(PAI)]) == 0
    text = capsys.readouterr().out
    assert "worker 6: first flagged" in text and "imbalance since the start" in text


def frame(speeds: np.ndarray, seed: int = 1, jitter: float = 0.03) -> pd.DataFrame:
    """``speeds``: steps × workers multipliers of a 1.0 s step, with ``jitter`` per step."""
    rng = np.random.default_rng(seed)
    secs = speeds * rng.normal(1.0, jitter, speeds.shape)
    steps, workers = speeds.shape
    return pd.DataFrame({"worker": np.tile([str(w) for w in range(workers)], steps),
                         "step": np.repeat(np.arange(steps), workers), "seconds": secs.ravel()})


def test_fast_minority_flags_nobody_and_is_imbalance():
    """Three of ten workers 10-20% faster from start to end: the seven others are not stragglers."""
    speeds = np.ones((1500, 10))
    speeds[:, [2, 5, 8]] = [0.9, 0.85, 0.8]
    found = result(frame(speeds))
    assert found["stragglers"] == []
    ranks = {r["worker"]: r["ratio"] for imb in found["imbalance"] for r in imb["ranks"]}
    assert set(ranks) == {"2", "5", "8"} and all(r < 0.95 for r in ranks.values())


def test_steady_slow_few_are_imbalance_the_transient_one_is_the_straggler():
    """Three workers 6-10% slow throughout; worker 4 1.7x slow for 60 one-second steps mid-run. The
    6% one is close to the 5% below which a difference is every cluster's normal: it may be left out
    of the imbalance, never flagged."""
    speeds = np.ones((1500, 10))
    speeds[:, [1, 6, 9]] = [1.06, 1.1, 1.08]
    speeds[700:760, 4] = 1.7
    found = result(frame(speeds, seed=2))
    assert [(s["worker"], 700 <= s["first_flagged_step"] <= 712) for s in found["stragglers"]] == [("4", True)]
    assert {"6", "9"} <= {r["worker"] for imb in found["imbalance"] for r in imb["ranks"]} <= {"1", "6", "9"}


def test_two_groups_apart_from_the_start_only_the_two_that_slow_later():
    """Four workers 3x slower than six from the start; two of the slow ones slow a further 3x later."""
    speeds = np.ones((1500, 10))
    speeds[:, 6:] = 3.0
    speeds[900:, [7, 9]] = 9.0
    found = result(frame(speeds, seed=3))
    assert {s["worker"] for s in found["stragglers"]} == {"7", "9"}
    assert all(900 <= s["first_flagged_step"] <= 912 for s in found["stragglers"])
    (imb,) = found["imbalance"]
    ranks = {r["worker"]: r["ratio"] for r in imb["ranks"]}
    assert set(ranks) == {"6", "7", "8", "9"}
    # with six at the median, the four slow ones are 3x it, and the six wait 2/3 of every step
    assert all(r == pytest.approx(3.0, rel=0.05) for r in ranks.values())
    assert imb["lost_share"] == pytest.approx(0.6 * 2 / 3, abs=0.02)


@pytest.mark.parametrize("text, where", [
    ("rank,step,seconds\n1,1,1.0\n", ":1: header"),
    (",worker,gpu,time,batch_time_norm\n0,1,25,x,700\n", ":2: time"),
    ("worker,step,seconds\n1,1,1.0\n2,x,1.0\n", ":3: step"),
    ("worker,step,seconds\n1,1,1.0\n2,2,-1\n", ":3: seconds"),
    ("worker,step,seconds\n1,1\n", ":2: want 3 columns"),
])
def test_bad_csv_names_file_line_and_column(tmp_path, capsys, text, where):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=where):
        parse_csv(path)
    assert main(["analytics", "steptimes", str(path)]) == 2
    assert f"{path}{where}" in capsys.readouterr().err
