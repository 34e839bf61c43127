"""What ``/metrics`` renders comes from one refresh's snapshot: a refresh that runs while a worker thread
renders (it drops finished jobs' counters, adds new samples in place) can neither fail the scrape nor
pair one refresh's lost seconds with another's allocated seconds."""
from __future__ import annotations

from lockstep.analytics.service.metrics import render_metrics
from lockstep.analytics.service.refresh import RefreshState, Results
from lockstep.analytics.service.state import LossCounters
from lockstep.analytics.service.views import JobView, ScoreView, StallView, loss_view
from lockstep.exporters.toolkit.exposition import Encoder


def _view(job: str, counters: LossCounters) -> JobView:
    return JobView(job_id=job, time=100.0, gpus=(ScoreView("node00", "0", 1.0, False),), nodes=(), stragglers=(),
                   stall=StallView(False, None, None, {}), loss=loss_view(counters))


def test_metrics_render_from_the_results_snapshot_not_live_counters():
    counters = LossCounters(accounted_until=100.0, allocated=500.0)
    counters.lost["checkpoint"] = 50.0
    state = RefreshState()
    state.results = Results({"j1": _view("j1", counters)}, 100.0, {"j1": counters})
    state.losses = {}      # the next refresh already forgot j1 (finished), this render still holds the old results
    text = render_metrics(state, Encoder(), openmetrics=False)
    assert 'lockstep_job_lost_gpu_seconds_total{job_id="j1",cause="checkpoint"} 50' in text
    assert 'lockstep_job_goodput_ratio{job_id="j1"} 0.9' in text


def _checkpoint(start: float, duration: float, size: float, complete: bool = True) -> dict:
    return {"job_id": "j1", "start_s": start - 1000.0, "end_s": start - 1000.0 + duration, "duration_s": duration,
            "bytes": size, "bandwidth_bytes_per_second": size / duration, "start_timestamp": start, "complete": complete}


def test_each_checkpoint_counted_once_across_overlapping_windows_and_the_last_served():
    counters = LossCounters(accounted_until=100.0, allocated=500.0)
    first, second = _checkpoint(1100.0, 30.0, 2.0e12), _checkpoint(1700.0, 40.0, 3.0e12)
    counters.add_checkpoints([first])
    counters.add_checkpoints([{**first, "duration_s": 29.5}, {**second, "complete": False}])  # the next window
    assert counters.checkpoints == 1 and counters.checkpoint_bytes == 2.0e12
    counters.add_checkpoints([second])
    assert (counters.checkpoints, counters.checkpoint_seconds, counters.checkpoint_bytes) == (2, 70.0, 5.0e12)
    state = RefreshState()
    state.results = Results({"j1": _view("j1", counters)}, 100.0, {"j1": counters})
    text = render_metrics(state, Encoder(), openmetrics=False)
    assert 'lockstep_job_checkpoints_total{job_id="j1"} 2' in text
    assert 'lockstep_job_checkpoint_written_bytes_total{job_id="j1"} 5000000000000' in text
    assert 'lockstep_job_checkpoint_last_duration_seconds{job_id="j1"} 40' in text
    assert 'lockstep_job_checkpoint_last_bandwidth_bytes_per_second{job_id="j1"} 75000000000' in text
    assert 'lockstep_job_checkpoint_last_start_timestamp_seconds{job_id="j1"} 1700' in text


def test_a_job_without_checkpoints_serves_zero_counts_and_no_last_figures():
    counters = LossCounters(accounted_until=100.0, allocated=500.0)
    state = RefreshState()
    state.results = Results({"j1": _view("j1", counters)}, 100.0, {"j1": counters})
    text = render_metrics(state, Encoder(), openmetrics=False)
    assert 'lockstep_job_checkpoints_total{job_id="j1"} 0' in text
    assert "lockstep_job_checkpoint_last_duration_seconds" not in text.replace("# HELP lockstep_job_checkpoint_last", "")
