"""VAST clusters through the built-in Prometheus exporter of VAST's management service (VMS), mapped to the common
storage-system metrics. Pure parsing; the fetches are the poller's. The sources of every name and label below are
in tests/fixtures/vast/README.md; the excerpts, by section (§), in tests/fixtures/vast/evidence.md.

``GET /api/prometheusmetrics/`` (the cluster and protocol metrics, VAST 4.6.0-sp11 and later), at scope ``cluster``,
named by the answer's ``cluster`` label (a cluster without a ``cluster`` label is named by its target). What is
read, as VAST's own dashboards query it (§5, §7):
- the protocol counters ``..._ProtoMetrics_{read,write}_{size,latency}_{sum,count}`` over all protocols: each
  CNode's, ``vast_cnode_metrics_ProtoMetrics_*{proto_name="ProtoCommon"}`` (labels ``cluster``, ``hostname``,
  ``proto_name``; VAST 5.2.0-sp22 and later), summed over the CNodes by the poller's monotonic sums; else the
  cluster's, ``vast_cluster_metrics_ProtoMetrics_*{proto_name="ProtoAll"}`` (5.1.0-sp40 to 5.2.0-sp20). Bytes are
  ``size_sum``, operations ``size_count`` (VAST's IOPS panels), the time they took ``latency_sum``
  (microseconds). VAST's dashboards read them through ``rate()``: counters;
- the cluster's logical capacity and its use, ``vast_cluster_logical_space`` and
  ``vast_cluster_logical_space_in_use`` (bytes, gauges: what the clients see, before data reduction).

``GET /api/prometheusmetrics/views`` ("Performance per view, logical/physical capacity, QoS", §1), only for a target
with ``views: true``, at scope ``view``, named by the view's ``path`` label. What is read: the families VAST's "Top
Actors - Views" dashboards of 5.1.0-sp40 to 5.2.2 take through ``rate()`` (§6a; §10, the 5.2.0-sp15 and 5.2.2
files), so counters, labelled ``cluster``, ``path`` (and ``tenant_name`` in 5.2.0-sp15):
- ``vast_view_metrics_ViewMetrics_{read,write}_bw_sum``: bytes read and written (the panels show their rate in
  ``Bps``);
- ``vast_view_metrics_ViewMetrics_{read,write}_iops_count``: operations (the "Read IOPs" and "Write IOPs" panels,
  ``ops``);
- ``vast_view_metrics_ViewMetrics_{read,write}_latency_sum``: the time those took, microseconds (§9: "latency
  metrics are in microseconds"; the panels show the rate of it over that of ``..._latency_count`` in ``µs``);
- ``vast_view_logical_capacity``: the bytes the view holds as its clients see them (a gauge, ``decbytes``, §7), as
  ``used_bytes``. It is one of a pair only: no family of the evidence gives a view's size (a view's limit is its
  quota, ``vast_quota_hard_limit{path}``, §7, of the ``/quotas`` endpoint's "Quota limits", §1, not read here), so a
  view has no ``capacity_bytes``. That this family is what the view holds, not a size, is this reader's
  reading of the evidence: VAST ranks views by it with ``topk`` and leaves out the root view ``/``, which holds
  everything (§7, §10).
Each row of the answer is a source of the poller's monotonic sums for the views (``monotonic.CounterSums``, one
apart from the cluster's): a view absent from an answer adds nothing and keeps its last value until it is back; a
view whose counters start again (made anew at its path, or VMS restarting its counting) adds what it counted since;
rows of one path that differ in another label (one path in two tenants) are summed into that path's series, their
``vast_view_logical_capacity`` too.

Not read from ``/views``: ``..._{read,write}_md_iops_count`` (metadata operations; ``operations_total`` counts data
operations here, as at scope cluster), ``..._{read,write}_latency_count`` (the common latency total is divided by
``operations_total``, here ``..._iops_count``: that the two count the same operations is assumed, not shown by the
evidence), ``vast_view_physical_capacity`` (after data reduction; the cluster's use is read before it too) and the
QoS wait ``..._qos_wait_for_budget_time_{sum,count}`` (nanoseconds, §9). Not read at all: the per-user-and-view
gauges ``vast_user_view_*`` (endpoint ``/user_view``, 5.2-sp15 and later) that VAST's 5.3.0 to 5.4.1 dashboards sum
by ``path`` for per-view bandwidth, IOPS and latency instead (§6b): they are rates at one moment, not counters, and
the sources disagree on the unit of their latency (µs or ms; §6b, §9). Those later dashboards no longer query the
``vast_view_metrics_ViewMetrics_*`` counters except the QoS one, and VAST's external exporter (4.2 to 4.4) gave
these names the latest per-interval values rather than running totals (§4): whether VMS 5.3 and later exports the
counters read here, and as counters, was not established (README, "What is missing", 3). An answer of ``/views``
with none of the families read is refused (``AnswerError``); the poller then keeps the cluster's series."""
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

VIEWS_PATH = "/api/prometheusmetrics/views"
VIEW_PREFIX = "vast_view_metrics_ViewMetrics_"
# each view counter read (its family less VIEW_PREFIX) -> (metric, op: "" for bytes, factor to the metric's unit)
VIEW_COUNTERS = {
    "read_bw_sum": (m.READ_BYTES, "", 1.0), "write_bw_sum": (m.WRITE_BYTES, "", 1.0),
    "read_iops_count": (m.OPERATIONS, "read", 1.0), "write_iops_count": (m.OPERATIONS, "write", 1.0),
    "read_latency_sum": (m.LATENCY, "read", _MICROSECONDS), "write_latency_sum": (m.LATENCY, "write", _MICROSECONDS),
}
VIEW_USED = "vast_view_logical_capacity"


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


def _view_row(labels: dict[str, str]) -> str:
    """A view row's source in the views' sums: its labels but ``path`` (the series is named by the path)."""
    return "view " + ",".join(f"{k}={v!r}" for k, v in sorted(labels.items()) if k != "path")


def read_view_sources(target: str, text: str) -> dict[str, list[Sample]]:
    """An answer of VMS's ``/api/prometheusmetrics/views`` as samples per view row (``_view_row``), not summed; the
    views' logical use, summed per path, under the source ``""``. A row without a ``path`` names no view and is
    skipped. An answer with neither view counters nor view capacity is not VAST's views (an ``AnswerError``)."""
    # only the families read: a QoS or metadata line this reader cannot parse never costs the views
    samples = parse_samples(text, tuple(VIEW_PREFIX + family for family in VIEW_COUNTERS) + (VIEW_USED,))
    sources: dict[str, list[Sample]] = {}
    used: dict[str, float] = {}
    for s in samples:
        path = s.labels.get("path")
        if not path:
            continue
        if s.name == VIEW_USED:
            used[path] = used.get(path, 0.0) + s.value
            continue
        found = VIEW_COUNTERS.get(s.name.removeprefix(VIEW_PREFIX))
        if found is None:
            continue
        metric, op, factor = found
        key = (target, "view", path)
        sources.setdefault(_view_row(s.labels), []).append(Sample(metric, (*key, op) if op else key, s.value * factor))
    if used:
        sources[""] = [Sample(m.USED, (target, "view", path), value) for path, value in used.items()]
    if not sources:
        raise AnswerError(f"no {VIEW_PREFIX}* counters and no {VIEW_USED} with a path label in the answer")
    return sources


def read_views(target: str, text: str) -> list[Sample]:
    """One answer of ``/views`` alone as samples of the common metrics at scope view (as the poller's first)."""
    return CounterSums().combine(read_view_sources(target, text))
