"""Which exported counters a replica continues for a job (``analytics.resume``); the service test
proves the whole restart against a real Prometheus."""
from __future__ import annotations

from analytics.resume import counters_from


def test_resumed_counters_come_from_the_exporter_that_accounted_furthest():
    def series(name, value, instance, **labels):
        return {"metric": {"__name__": name, "job_id": "7", "job": "lockstep-analytics", "instance": instance,
                           **labels}, "value": [1000.0, str(value)]}

    result = [series("lockstep_job_accounted_until_timestamp_seconds", 500, "old:9842"),
              series("lockstep_job_allocated_gpu_seconds_total", 10, "old:9842"),
              series("lockstep_job_accounted_until_timestamp_seconds", 900, "new:9842"),
              series("lockstep_job_allocated_gpu_seconds_total", 40, "new:9842"),
              series("lockstep_job_lost_gpu_seconds_total", 3, "new:9842", cause="checkpoint"),
              {"metric": {"job_id": "7"}, "value": [1000.0, "8"]}]   # not an answer to the query: ignored
    counters = counters_from(result)
    assert (counters.accounted_until, counters.allocated) == (900, 40)
    assert counters.lost["checkpoint"] == 3 and counters.lost["straggler"] == 0   # a cause not exported: 0
    assert counters_from(result[-1:]) is None
    assert counters_from([series("lockstep_job_accounted_until_timestamp_seconds", 900, "x")]) is None
