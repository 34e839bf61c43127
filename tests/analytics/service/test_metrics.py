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
