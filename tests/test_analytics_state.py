"""What ``/metrics`` renders comes from one refresh's snapshot: a refresh that runs while a worker thread
renders (it drops finished jobs' counters, adds new samples in place) can neither fail the scrape nor
pair one refresh's lost seconds with another's allocated seconds."""
from __future__ import annotations

from analytics.service import ServiceState, render_metrics
from analytics.state import LossCounters, Results


def _view(job: str) -> dict:
    return {"job_id": job, "time": 100.0, "gpus": [{"node": "node00", "gpu": "0", "score": 1.0, "flagged": False}],
            "nodes": [], "stragglers": [], "stall": {"stalled": False, "cause": None, "since": None, "evidence": {}}}


def test_metrics_render_from_the_results_snapshot_not_live_counters():
    counters = LossCounters(accounted_until=100.0, allocated=500.0)
    counters.lost["checkpoint"] = 50.0
    state = ServiceState()
    state.results = Results({"j1": _view("j1")}, 100.0, {"j1": counters})
    state.losses = {}      # the next refresh already forgot j1 (finished), this render still holds the old results
    text = render_metrics(state, openmetrics=False)
    assert 'lockstep_job_lost_gpu_seconds_total{job_id="j1",cause="checkpoint"} 50' in text
    assert 'lockstep_job_goodput_ratio{job_id="j1"} 0.9' in text
