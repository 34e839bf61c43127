"""MinIO's bucket metrics (``GET /minio/v2/metrics/bucket``, Prometheus text; docs/metrics/prometheus/list.md
in minio/minio, "Bucket Metrics"), read into one ``BucketStats`` per bucket and mapped to the common
storage-system metrics. Pure parsing; the fetch is the poller's.

The endpoint's answer is the node's own bucket metrics plus its peers' (cmd/metrics-v2.go,
``minioBucketCollector.Collect``), each series labelled with its ``server``: request and traffic
counters are per server and summed, while usage (bytes, objects, quota) comes from the cluster's
data-usage scan once, from the answering node. The poller reads each server apart (``read_sources``) and sums
with ``monotonic.CounterSums``, so that one server's restart or absence never makes a summed counter go backwards;
``read`` is one answer summed the same way."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys.monotonic import CounterSums
from lockstep.exporters.storagesys.promtext import by_label
from lockstep.exporters.toolkit.sample import Sample

METRICS_PATH = "/minio/v2/metrics/bucket"


@dataclass
class BucketStats:
    bucket: str
    sent_bytes: float | None = None       # to clients: reads
    received_bytes: float | None = None   # from clients: writes
    requests: dict[str, float] = field(default_factory=dict)  # per S3 API (lower case, as MinIO labels it)
    errors_4xx: float | None = None
    errors_5xx: float | None = None
    used_bytes: float | None = None
    objects: float | None = None
    quota_bytes: float | None = None


def _add(current: float | None, value: float) -> float:
    return value if current is None else current + value


# The series a bucket is read from, by the ``BucketStats`` field each fills (the only lines ``read_sources`` parses):
# counters, added up where one server's answer holds several lines of one, and usage, the last line's.
# minio_bucket_traffic_*_bytes are typed gauge but count since server start (their HELP: "Total number of S3 bytes
# ..."): counters here.
_SUMMED = {"minio_bucket_traffic_sent_bytes": "sent_bytes", "minio_bucket_traffic_received_bytes": "received_bytes",
           "minio_bucket_requests_4xx_errors_total": "errors_4xx",
           "minio_bucket_requests_5xx_errors_total": "errors_5xx"}
_USAGE = {"minio_bucket_usage_total_bytes": "used_bytes", "minio_bucket_usage_object_total": "objects",
          "minio_bucket_quota_total_bytes": "quota_bytes"}
_REQUESTS = "minio_bucket_requests_total"    # per S3 API
READ = (*_SUMMED, *_USAGE, _REQUESTS)


def _buckets(rows: Iterable[tuple[str, dict[str, str], float]]) -> list[BucketStats]:
    """Series without a ``bucket`` label (the replication proxy failures,
    ``minio_usage_last_activity_nano_seconds``) are not per bucket and are skipped."""
    buckets: dict[str, BucketStats] = {}
    for name, labels, value in rows:
        bucket = labels.get("bucket")
        if not bucket:
            continue
        b = buckets.setdefault(bucket, BucketStats(bucket))
        if name in _SUMMED:
            setattr(b, _SUMMED[name], _add(getattr(b, _SUMMED[name]), value))
        elif name in _USAGE:
            setattr(b, _USAGE[name], value)
        elif name == _REQUESTS:
            api = labels.get("api", "")
            b.requests[api] = b.requests.get(api, 0.0) + value
    return [buckets[k] for k in sorted(buckets)]


def samples(target: str, buckets: list[BucketStats]) -> Iterator[Sample]:
    for b in buckets:
        key = (target, "bucket", b.bucket)
        for metric, value in ((m.READ_BYTES, b.sent_bytes), (m.WRITE_BYTES, b.received_bytes),
                              (m.USED, b.used_bytes), (m.CAPACITY, b.quota_bytes), (m.OBJECTS, b.objects)):
            if value is not None:
                yield Sample(metric, key, value)
        for api in sorted(b.requests):
            yield Sample(m.OPERATIONS, (*key, api), b.requests[api])
        if b.errors_4xx is not None:
            yield Sample(m.ERRORS, (*key, "client"), b.errors_4xx)
        if b.errors_5xx is not None:
            yield Sample(m.ERRORS, (*key, "server"), b.errors_5xx)


def read_sources(target: str, text: str) -> dict[str, list[Sample]]:
    """An answer of the bucket endpoint as samples per server (its ``server`` label), not summed."""
    return {server: list(samples(target, _buckets(rows)))
            for server, rows in by_label(text, "minio_", "server", READ).items()}


def read(target: str, text: str) -> list[Sample]:
    """One answer alone as samples of the common metrics, summed over its servers (as the poller's first answer)."""
    return CounterSums().combine(read_sources(target, text))
