"""A straggler's three views of pace: each judged agree, disagree or absent over its flagged samples, and the
host named as the cause where the job's own pace shows the rank slow while its GPU counters do not."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from lockstep.analytics.scoring import views
from lockstep.analytics.scoring.relative import Drift
from lockstep.exporters.catalog.enums import ABSENT, AGREE, DISAGREE, HARDWARE, HOST, TRANSIENT

T, N = 10, 4


def _drift(known: bool) -> Drift:
    level = np.zeros((T, N)) if known else np.full((T, N), np.nan)
    return Drift(level, level, level[0], level, 0.01)


def _result(hit: dict[str, bool], known: dict[str, bool]) -> SimpleNamespace:
    """Column 1 hit by the signals of ``hit`` on every sample; the others never."""
    names = ("work", "step", "clock", "collective", "tx")
    hits = {}
    for name in (*names, "reason", "wait"):
        h = np.zeros((T, N), bool)
        h[:, 1] = hit.get(name, False)
        hits[name] = h
    return SimpleNamespace(drifts={n: _drift(known.get(n, True)) for n in names}, hits=hits)


ROWS = np.ones(T, bool)


def test_step_and_collective_slow_gpu_normal_is_the_host():
    res = _result({"step": True, "collective": True}, {})
    seen = views.judge(res, ROWS, 1)
    assert seen == {"step_time": AGREE, "collective": AGREE, "gpu": DISAGREE}
    assert views.cause(TRANSIENT, seen) == HOST


def test_a_gpu_signal_that_agrees_keeps_the_cause():
    res = _result({"step": True, "collective": True, "work": True}, {})
    seen = views.judge(res, ROWS, 1)
    assert seen["gpu"] == AGREE
    assert views.cause(TRANSIENT, seen) == TRANSIENT


def test_hardware_evidence_wins_over_the_views():
    seen = views.judge(_result({"collective": True, "step": True}, {}), ROWS, 1)
    assert views.cause(HARDWARE, seen) == HARDWARE


def test_views_without_data_are_absent_and_name_no_host():
    res = _result({"work": True, "clock": True}, {"step": False, "collective": False})
    seen = views.judge(res, ROWS, 1)
    assert seen == {"step_time": ABSENT, "collective": ABSENT, "gpu": AGREE}
    assert views.cause(TRANSIENT, seen) == TRANSIENT


def test_gpu_counters_absent_name_no_host():
    res = _result({"step": True, "collective": True}, {"work": False, "clock": False})
    seen = views.judge(res, ROWS, 1)
    assert seen["gpu"] == ABSENT
    assert views.cause(TRANSIENT, seen) == TRANSIENT


def test_a_view_agrees_only_on_most_of_the_flagged_samples():
    res = _result({"collective": True}, {})
    res.hits["collective"][: T // 2 + 1, 1] = False
    assert views.judge(res, ROWS, 1)["collective"] == DISAGREE
