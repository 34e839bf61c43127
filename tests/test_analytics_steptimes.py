"""``lockstep analytics steptimes``: per-rank step times from a CSV with a known slow worker.

The CSV is generated here: the slow worker, the step it slows down from and how much are the
ground truth (never the scorer's output).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from analytics.steptimes import parse_csv, stragglers
from exporters.configfile import ConfigError
from lockstep.cli import main

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
    assert list(out) == ["stragglers"]
    (s,) = out["stragglers"]
    assert set(s) == {"worker", "first_flagged_step", "score"} and s["worker"] == SLOW_WORKER
    assert isinstance(s["first_flagged_step"], int) and isinstance(s["score"], float)


@pytest.mark.parametrize("text, where", [
    ("rank,step,seconds\n1,1,1.0\n", ":1: header"),
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
