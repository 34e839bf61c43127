"""Checkpoints measured from a job's write rate and activity (lockstep.analytics.scoring.checkpoints), on
hand-built job signals whose writes are integrated from known checkpoints."""
from __future__ import annotations

import numpy as np
import pytest

from lockstep.analytics.scoring import checkpoints
from lockstep.analytics.scoring.stall import JobSignals

P = 5.0
N = 120
USUAL_WRITE = 2.0e6       # logs and metrics, bytes/s


def _signals(writes: list[tuple[float, float, float]], drop: bool = True) -> JobSignals:
    """``writes``: (start_s, duration_s, bytes/s) of each burst; each sample at t holds what (t - P, t]
    wrote (a counter's increase over the sample), and the job's activity falls while it writes (``drop``)."""
    times = np.arange(1, N + 1) * P
    write = np.full(N, USUAL_WRITE)
    share = np.zeros(N)
    for a, d, rate in writes:
        covered = np.clip(np.minimum(times, a + d) - np.maximum(times - P, a), 0.0, P) / P
        write += covered * rate
        share = np.maximum(share, covered)
    progress = 0.8 * (1.0 - share) if drop else np.full(N, 0.8)
    work = np.repeat(progress[:, None], 8, axis=1)
    totals = {name: np.zeros(N) for name in ("read", "pause", "cnp", "tx", "xmit_wait")}
    totals["write"] = write
    return JobSignals(times, work, work, progress, 0.8, totals, np.zeros(N, bool))


def test_each_checkpoint_measured_by_its_part_of_the_edge_samples():
    bursts = [(102.5, 30.0, 6.0e10), (301.0, 44.0, 2.5e10)]
    js = _signals(bursts)
    got = checkpoints.detect("7", js, np.full(N, "", dtype=object), None, 0.0, P)
    assert len(got) == 2
    for found, (a, d, rate) in zip(got, bursts):
        assert found["start_s"] == pytest.approx(a, abs=0.01)
        assert found["duration_s"] == pytest.approx(d, rel=0.001)
        assert found["bytes"] == pytest.approx(d * rate, rel=0.001)
        assert found["bandwidth_bytes_per_second"] == pytest.approx(rate, rel=0.001)
        assert found["end_s"] == pytest.approx(a + d, abs=0.01)
        assert found["job_id"] == "7"


def test_a_burst_the_job_does_not_wait_for_is_not_its_checkpoint():
    js = _signals([(200.0, 30.0, 6.0e10)], drop=False)
    assert checkpoints.detect("7", js, np.full(N, "", dtype=object), None, 0.0, P) == []


def test_a_burst_the_classifier_calls_a_checkpoint_counts_without_a_visible_drop():
    js = _signals([(200.0, 30.0, 6.0e10)], drop=False)
    causes = np.full(N, "", dtype=object)
    causes[40] = "checkpoint"
    got = checkpoints.detect("7", js, causes, None, 0.0, P)
    assert [round(c["duration_s"]) for c in got] == [30]


def test_writes_below_the_burst_floor_are_no_checkpoint():
    js = _signals([(200.0, 30.0, 5.0e7)])
    assert checkpoints.detect("7", js, np.full(N, "", dtype=object), None, 0.0, P) == []


def test_the_target_is_the_file_system_that_took_the_most_bytes():
    written = {("/lustre", "lustre"): 9.0e11, ("/home", "nfs4"): 1.0e9, ("/scratch", "xfs"): 0.0}
    assert checkpoints.target(written) == {"mount": "/lustre", "fstype": "lustre", "target_share": 0.999}
    assert checkpoints.target({}) == {} and checkpoints.target({("/home", "nfs4"): 0.0}) == {}


def test_a_checkpoints_span_covers_the_samples_its_writes_land_in():
    """At 5 s samples, a write from 102.5 s for 30 s lands in the samples ending at 105 ... 135 s; the window
    reaches one sample further (a rate at a sample reads the one before)."""
    assert checkpoints.span({"start_timestamp": 102.5, "duration_s": 30.0}, 5.0) == (105.0, 140.0)
