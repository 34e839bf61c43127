"""MinIO's bucket endpoint decoded into the common storage-system metrics, on MinIO's own recorded answer
(tests/fixtures/minio/README.md); the expected values are read off that capture by hand."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import minio
from lockstep.exporters.storagesys.errors import AnswerError
from tests.helpers.storagefake import MINIO_BUCKET, two_servers

B = ("s3", "bucket", "mybucket")


def as_dict(samples):
    return {(s.metric.name, s.labels): s.value for s in samples}


def test_the_recorded_answer_decodes_to_the_bucket_metrics():
    got = as_dict(minio.read("s3", MINIO_BUCKET))
    assert got == {
        (m.READ_BYTES.name, B): 1232.0,      # minio_bucket_traffic_sent_bytes
        (m.WRITE_BYTES.name, B): 178.0,      # minio_bucket_traffic_received_bytes
        (m.USED.name, B): 0.0,
        (m.OBJECTS.name, B): 0.0,
        (m.OPERATIONS.name, (*B, "getbucketlocation")): 2.0,
        (m.OPERATIONS.name, (*B, "getbucketobjectlockconfig")): 1.0,
        (m.OPERATIONS.name, (*B, "headbucket")): 2.0,
        (m.OPERATIONS.name, (*B, "listobjectsv2")): 1.0,
        (m.OPERATIONS.name, (*B, "putobject")): 1.0,
        (m.ERRORS.name, (*B, "client")): 1.0,
    }


def test_no_quota_no_5xx_and_no_latency_are_absent_not_zero():
    names = {s.metric.name for s in minio.read("s3", MINIO_BUCKET)}
    assert m.CAPACITY.name not in names and m.LATENCY.name not in names
    assert (m.ERRORS.name, (*B, "server")) not in as_dict(minio.read("s3", MINIO_BUCKET))


def test_per_server_counters_are_summed_and_usage_is_taken_once():
    got = as_dict(minio.read("s3", two_servers(MINIO_BUCKET)))
    assert got[(m.READ_BYTES.name, B)] == 2464.0
    assert got[(m.WRITE_BYTES.name, B)] == 356.0
    assert got[(m.OPERATIONS.name, (*B, "headbucket"))] == 4.0
    assert got[(m.ERRORS.name, (*B, "client"))] == 2.0
    assert got[(m.USED.name, B)] == 0.0


@pytest.mark.parametrize("answer", [
    "<html><body>502 Bad Gateway</body></html>\n",
    '{"Code":"AccessDenied"}',
    "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 12\n",  # another service's metrics
    "",
    MINIO_BUCKET[: MINIO_BUCKET.index('minio_bucket_requests_total{api="headbucket"') + 40],  # cut mid-line
])
def test_an_answer_that_is_not_minio_metrics_is_an_error(answer):
    with pytest.raises(AnswerError):
        minio.read("s3", answer)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_decodes_or_raises_answer_error(text):
    try:
        samples = minio.read("s3", text)
    except AnswerError:
        return
    assert all(s.metric in m.METRICS for s in samples)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000).map(lambda b: MINIO_BUCKET.encode()[: len(b)].decode("utf-8", "ignore")))
def test_every_prefix_of_the_capture_decodes_or_raises_answer_error(prefix):
    try:
        minio.read("s3", prefix)
    except AnswerError:
        pass
