"""Ceph Object Gateway op counters as ceph-exporter serves them (``GET /metrics``, Prometheus text, port
9926 by default; src/exporter/DaemonMetricCollector.cc in ceph/ceph), mapped to the common storage-system
metrics. Pure parsing; the fetch is the poller's.

One ceph-exporter runs per host and serves every daemon's counters there, each RGW labelled with its
``instance_id``; the target is one such exporter. The ``rgw_op`` section (``ceph_rgw_op_*``) holds a
gateway's totals: scope ``cluster``, name ``rgw``, summed over the host's gateways. The ``rgw_op_per_bucket``
section (``ceph_rgw_op_per_bucket_*``, only where ``rgw_bucket_counters_cache`` is on; doc/radosgw/metrics.rst)
is per bucket: scope ``bucket``, name the bucket, or ``tenant/bucket`` where a tenant label says so. The
per-user section is not read (users are not a scope of the common metrics). The poller reads each
gateway apart (``read_sources``, by ``instance_id``) and sums with ``monotonic.CounterSums``, so that one gateway's
restart or absence never makes a summed counter go backwards; ``read`` is one answer summed the same way."""
from __future__ import annotations

from typing import Iterable, Iterator

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys.monotonic import CounterSums
from lockstep.exporters.storagesys.promtext import by_label
from lockstep.exporters.toolkit.sample import Sample

METRICS_PATH = "/metrics"
# the op counters of src/rgw/rgw_perf_counters.cc (add_rgw_op_counters): <op>_ops, <op>_bytes, <op>_lat
OPS = ("put_obj", "get_obj", "del_obj", "del_bucket", "copy_obj", "list_obj", "list_buckets")
_SECTIONS = (("ceph_rgw_op_per_bucket_", "bucket"), ("ceph_rgw_op_", "cluster"))
_GATEWAY = "rgw"  # the name of the cluster scope: the gateways the exporter serves


def _split(name: str) -> tuple[str, str, str] | None:
    """``ceph_rgw_op[_per_bucket]_<op>_<field>`` as (scope, op, field: ops, bytes, lat_sum, lat_count)."""
    for prefix, scope in _SECTIONS:
        if name.startswith(prefix):
            rest = name[len(prefix):]
            for op in OPS:
                if rest.startswith(op + "_"):
                    field = rest[len(op) + 1:]
                    if field in ("ops", "bytes", "lat_sum"):
                        return scope, op, field
            return None
    return None


def _found(rows: Iterable[tuple[str, dict[str, str], float]]) -> dict[tuple[str, str], dict[str, float]]:
    """(scope, name) -> {"ops:<op>", "bytes:<op>", "lat:<op>", "failed"} summed over ``rows``."""
    found: dict[tuple[str, str], dict[str, float]] = {}

    def add(key: tuple[str, str], field: str, value: float) -> None:
        entry = found.setdefault(key, {})
        entry[field] = entry.get(field, 0.0) + value

    for name, labels, value in rows:
        if name == "ceph_rgw_failed_req":
            add(("cluster", _GATEWAY), "failed", value)
            continue
        split = _split(name)
        if split is None:
            continue
        scope, op, field = split
        if scope == "bucket":
            bucket = labels.get("bucket")
            if not bucket:
                continue
            key = ("bucket", f"{labels['tenant']}/{bucket}" if labels.get("tenant") else bucket)
        else:
            key = ("cluster", _GATEWAY)
        add(key, f"{field.removesuffix('_sum')}:{op}", value)
    return found


def samples(target: str, found: dict[tuple[str, str], dict[str, float]]) -> Iterator[Sample]:
    for (scope, name) in sorted(found):
        fields, key = found[(scope, name)], (target, scope, name)
        if "bytes:get_obj" in fields:
            yield Sample(m.READ_BYTES, key, fields["bytes:get_obj"])
        if "bytes:put_obj" in fields:
            yield Sample(m.WRITE_BYTES, key, fields["bytes:put_obj"])
        for op in OPS:
            if f"ops:{op}" in fields:
                yield Sample(m.OPERATIONS, (*key, op), fields[f"ops:{op}"])
            if f"lat:{op}" in fields:
                yield Sample(m.LATENCY, (*key, op), fields[f"lat:{op}"])
        if "failed" in fields:
            yield Sample(m.ERRORS, (*key, "failed"), fields["failed"])


def read_sources(target: str, text: str) -> dict[str, list[Sample]]:
    """An answer of ceph-exporter as samples per gateway (its ``instance_id`` label), not summed."""
    return {gateway: list(samples(target, _found(rows)))
            for gateway, rows in by_label(text, "ceph_rgw_", "instance_id").items()}


def read(target: str, text: str) -> list[Sample]:
    """One answer alone as samples of the common metrics, summed over its gateways (as the poller's first answer)."""
    return CounterSums().combine(read_sources(target, text))
