"""VAST clusters through the built-in Prometheus exporter of VAST's management service (VMS: ``GET
/api/prometheusmetrics/``, the cluster and protocol metrics, VAST 4.6.0-sp11 and later), mapped to the common
storage-system metrics at scope ``cluster``, named by the answer's ``cluster`` label. Pure parsing; the fetch is
the poller's (a cluster without a ``cluster`` label is named by its target). The sources of every name and label
below are in tests/fixtures/vast/README.md.

What is read, as VAST's own dashboards query it:
- the protocol counters ``..._ProtoMetrics_{read,write}_{size,latency}_{sum,count}`` over all protocols: each
  CNode's, ``vast_cnode_metrics_ProtoMetrics_*{proto_name="ProtoCommon"}`` (labels ``cluster``, ``hostname``,
  ``proto_name``; VAST 5.2.0-sp22 and later), summed over the CNodes by the poller's monotonic sums; else the
  cluster's, ``vast_cluster_metrics_ProtoMetrics_*{proto_name="ProtoAll"}`` (5.1.0-sp40 to 5.2.0-sp20). Bytes are
  ``size_sum``, operations ``size_count`` (VAST's IOPS panels), the time they took ``latency_sum``
  (microseconds). VAST's dashboards read them through ``rate()``: counters;
- the cluster's logical capacity and its use, ``vast_cluster_logical_space`` and
  ``vast_cluster_logical_space_in_use`` (bytes, gauges: what the clients see, before data reduction).

Per view (``vast_view_metrics_*``, ``vast_user_view_*``) is not read: VAST's dashboards moved from counters to gauges
for it across releases, and disagree on its latency unit."""
from __future__ import annotations

from typing import Iterator

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.storagesys.monotonic import CounterSums
from lockstep.exporters.storagesys.promtext import PromSample, parse_samples
from lockstep.exporters.toolkit.sample import Sample

METRICS_PATH = "/api/prometheusmetrics/"
# (family prefix, proto_name counting every protocol), newer first: an answer with both is read from the first
PROTOCOLS = (("vast_cnode_metrics_ProtoMetrics_", "ProtoCommon"), ("vast_cluster_metrics_ProtoMetrics_", "ProtoAll"))
CAPACITY = "vast_cluster_logical_space"
USED = "vast_cluster_logical_space_in_use"
OPS = ("read", "write")
_MICROSECONDS = 1e-6


def _protocols(samples: list[PromSample]) -> tuple[str, str] | None:
    """The family and ``proto_name`` counting every protocol in this answer (None: it has neither)."""
    present = {(prefix, s.labels.get("proto_name")) for s in samples for prefix, _ in PROTOCOLS
               if s.name.startswith(prefix)}
    return next((p for p in PROTOCOLS if p in present), None)


def _counters(target: str, samples: list[PromSample], prefix: str, protocol: str) -> Iterator[tuple[str, Sample]]:
    """(CNode, sample) of the common counters from one answer's protocol rows (CNode "": the cluster's own)."""
    for s in samples:
        if not s.name.startswith(prefix) or s.labels.get("proto_name") != protocol:
            continue
        op, _, field = s.name[len(prefix):].partition("_")
        if op not in OPS:
            continue
        key = (target, "cluster", s.labels.get("cluster") or target)
        cnode = s.labels.get("hostname", "")
        if field == "size_sum":
            yield cnode, Sample(m.READ_BYTES if op == "read" else m.WRITE_BYTES, key, s.value)
        elif field == "size_count":
            yield cnode, Sample(m.OPERATIONS, (*key, op), s.value)
        elif field == "latency_sum":
            yield cnode, Sample(m.LATENCY, (*key, op), s.value * _MICROSECONDS)


def read_sources(target: str, text: str) -> dict[str, list[Sample]]:
    """An answer of VMS's ``/api/prometheusmetrics/`` as samples per CNode (its ``hostname``), not summed; the
    cluster's capacity under the source ``""``. An answer with neither protocol counters nor capacity is not VAST's
    (an ``AnswerError``)."""
    # only the families read: a line of another family that this reader cannot parse never costs the poll
    samples = parse_samples(text, tuple(prefix for prefix, _ in PROTOCOLS) + (CAPACITY,))
    found = _protocols(samples)
    sources: dict[str, list[Sample]] = {}
    if found is not None:
        for cnode, sample in _counters(target, samples, *found):
            sources.setdefault(cnode, []).append(sample)
    for s in samples:
        if s.name in (CAPACITY, USED):
            metric = m.CAPACITY if s.name == CAPACITY else m.USED
            sources.setdefault("", []).append(Sample(metric, (target, "cluster", s.labels.get("cluster") or target), s.value))
    if not sources:
        raise AnswerError("no protocol counters (" + ", ".join(f"{prefix}*{{proto_name={name!r}}}" for prefix, name in PROTOCOLS)
                          + f") and no {CAPACITY} in the answer")
    return sources


def read(target: str, text: str) -> list[Sample]:
    """One answer alone as samples of the common metrics, summed over its CNodes (as the poller's first answer)."""
    return CounterSums().combine(read_sources(target, text))
