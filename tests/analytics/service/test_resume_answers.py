"""Prometheus answers the analytics service decodes, on any JSON (hypothesis): the resumed loss counters
of an instant vector raise nothing, and a corrupt series loses that series alone."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.analytics.service.resume import counters_by_job

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10)
NAMES = st.sampled_from(["lockstep_job_accounted_until_timestamp_seconds", "lockstep_job_allocated_gpu_seconds_total",
                         "lockstep_job_lost_gpu_seconds_total", "up"])
LABELS = st.fixed_dictionaries({"__name__": NAMES, "job_id": st.sampled_from(["1", "2"])},
                               optional={"cause": st.sampled_from(["hang", "storage"]), "instance": st.text(max_size=3)})
VALUE = st.tuples(st.floats(0, 2e9), st.sampled_from(["1", "0", "NaN", "+Inf", "x", ""]) | st.text(max_size=4)).map(list)
SERIES = st.one_of(st.fixed_dictionaries({"metric": LABELS | JSON, "value": VALUE | JSON}), JSON)


def exported(job_id: str, until: float) -> list[dict]:
    return [{"metric": {"__name__": "lockstep_job_accounted_until_timestamp_seconds", "job_id": job_id},
             "value": [until, str(until)]},
            {"metric": {"__name__": "lockstep_job_allocated_gpu_seconds_total", "job_id": job_id},
             "value": [until, "3200"]}]


@FAST
@given(st.lists(SERIES, max_size=6) | JSON)
def test_resumed_counters_never_raise(result):
    for counters in counters_by_job(result).values():
        assert counters.allocated == counters.allocated   # a number, never NaN


@FAST
@given(st.lists(SERIES, min_size=1, max_size=4))
def test_corrupt_series_lose_only_themselves(noise):
    """Job 7 is exported cleanly next to anything: it resumes as exported."""
    counters = counters_by_job([*noise, *exported("7", 1800.0)])["7"]
    assert (counters.accounted_until, counters.allocated) == (1800.0, 3200.0)
