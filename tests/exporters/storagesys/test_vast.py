"""VAST through VMS's built-in Prometheus exporter (``exporters/storagesys/vast.py``) on answers constructed from the
names and labels VAST's own dashboards query (tests/fixtures/vast/README.md): the cluster's bytes, operations and
latency over all protocols, summed over its CNodes, and its logical capacity; per-protocol rows never counted twice;
an answer that is not VAST's refused."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import vast
from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.storagesys.monotonic import CounterSums
from tests.helpers.paths import FIXTURES

NEW = (FIXTURES / "vast" / "prometheusmetrics-cluster.prom").read_text()
OLD = (FIXTURES / "vast" / "prometheusmetrics-cluster-protoall.prom").read_text()
MINIO = (FIXTURES / "minio" / "bucket-metrics.prom").read_text()


def values(samples) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in samples}


def test_the_clusters_counters_are_its_cnodes_over_all_protocols():
    """cnode-1 and cnode-2's ProtoCommon rows of the fixture, added by hand; their NFSCommon and S3Common rows
    (a part of the same traffic) are not added again."""
    got = values(vast.read("lab", NEW))
    key = ("lab", "cluster", "vast-lab")
    assert got == {
        (m.READ_BYTES.name, key): 7_500_000_000_000 + 7_000_000_000_000,
        (m.WRITE_BYTES.name, key): 2_250_000_000_000 + 2_000_000_000_000,
        (m.OPERATIONS.name, (*key, "read")): 120_000_000 + 110_000_000,
        (m.OPERATIONS.name, (*key, "write")): 45_000_000 + 40_000_000,
        # microseconds to seconds
        (m.LATENCY.name, (*key, "read")): pytest.approx(60_000 + 55_000),
        (m.LATENCY.name, (*key, "write")): pytest.approx(36_000 + 30_000),
        (m.USED.name, key): 1_200_000_000_000_000,
        (m.CAPACITY.name, key): 2_000_000_000_000_000,
    }


def test_releases_before_protocommon_are_read_from_the_clusters_protoall_rows():
    got = values(vast.read("old", OLD))
    key = ("old", "cluster", "vast-old")
    assert got[(m.READ_BYTES.name, key)] == 9_000_000_000_000       # ProtoAll, not ProtoAll + NFSCommon
    assert got[(m.WRITE_BYTES.name, key)] == 3_000_000_000_000
    assert got[(m.OPERATIONS.name, (*key, "read"))] == 150_000_000
    assert got[(m.LATENCY.name, (*key, "write"))] == pytest.approx(42_000)
    assert got[(m.USED.name, key)] == 300_000_000_000_000


def test_an_answer_with_both_generations_is_read_once_from_the_cnodes():
    older = "".join(line + "\n" for line in OLD.replace("vast-old", "vast-lab").splitlines() if "ProtoMetrics" in line)
    both = values(vast.read("lab", NEW + older))
    assert both == values(vast.read("lab", NEW))


def test_per_cnode_sources_keep_the_sum_from_going_backwards_when_one_restarts():
    sums = CounterSums()
    first = values(sums.combine(vast.read_sources("lab", NEW)))
    restarted = NEW.replace('read_size_sum{cluster="vast-lab",hostname="cnode-2",proto_name="ProtoCommon"} 7000000000000',
                            'read_size_sum{cluster="vast-lab",hostname="cnode-2",proto_name="ProtoCommon"} 1000')
    assert restarted != NEW
    again = values(sums.combine(vast.read_sources("lab", restarted)))
    key = (m.READ_BYTES.name, ("lab", "cluster", "vast-lab"))
    assert again[key] == first[key] + 1000


@pytest.mark.parametrize("answer", [MINIO, 'vast_cluster_drr{cluster="x"} 2.1\n', "<html>login</html>\n"])
def test_an_answer_without_vasts_counters_or_capacity_is_refused(answer):
    with pytest.raises(AnswerError):
        vast.read("lab", answer)


cnode = st.tuples(*(st.integers(0, 10**15) for _ in range(6)))


@settings(max_examples=60, deadline=None)
@given(st.lists(cnode, min_size=1, max_size=8), st.integers(0, 10**12))
def test_any_cnodes_sum_to_the_clusters_counters(cnodes, other_protocol):
    """Whatever the CNodes count (read/write bytes, operations, latency in µs), the cluster's counters are their
    sums, the latency in seconds; a per-protocol row of any size adds nothing."""
    lines = []
    for i, (rb, ro, rl, wb, wo, wl) in enumerate(cnodes):
        for name, v in (("read_size_sum", rb), ("read_size_count", ro), ("read_latency_sum", rl),
                        ("write_size_sum", wb), ("write_size_count", wo), ("write_latency_sum", wl)):
            for proto, value in (("ProtoCommon", v), ("NFSCommon", other_protocol)):
                lines.append(f'vast_cnode_metrics_ProtoMetrics_{name}{{cluster="c",hostname="cn{i}",proto_name="{proto}"}} '
                             f"{value}")
    got = values(vast.read("t", "\n".join(lines) + "\n"))
    key = ("t", "cluster", "c")
    total = [sum(c[k] for c in cnodes) for k in range(6)]
    assert got[(m.READ_BYTES.name, key)] == total[0] and got[(m.WRITE_BYTES.name, key)] == total[3]
    assert got[(m.OPERATIONS.name, (*key, "read"))] == total[1]
    assert got[(m.OPERATIONS.name, (*key, "write"))] == total[4]
    assert got[(m.LATENCY.name, (*key, "read"))] == pytest.approx(total[2] * 1e-6)
    assert got[(m.LATENCY.name, (*key, "write"))] == pytest.approx(total[5] * 1e-6)


def test_only_the_families_read_must_parse():
    """A line of a family the reader does not use, however broken, costs nothing; one of a family it reads refuses
    the answer (a half-read cluster would export sums that look whole)."""
    unrelated = 'vast_vms_alarms{severity="MAJOR",alarm_message="cut off\n'
    assert values(vast.read("lab", NEW + unrelated)) == values(vast.read("lab", NEW))
    broken = 'vast_cnode_metrics_ProtoMetrics_read_size_sum{cluster="vast-lab",hostname="cnode-3" 12\n'
    with pytest.raises(AnswerError, match="line 39"):
        vast.read("lab", NEW + broken)
    with pytest.raises(AnswerError, match=r"no vast_cnode_metrics_ProtoMetrics_\* or vast_cluster_metrics"):
        vast.read("lab", MINIO)
