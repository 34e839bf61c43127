"""VAST through VMS's built-in Prometheus exporter (``exporters/storagesys/vast.py``) on answers constructed from the
names and labels VAST's own dashboards query (tests/fixtures/vast/README.md): the cluster's bytes, operations and
latency over all protocols, summed over its CNodes, and its logical capacity; per-protocol rows never counted twice;
an answer that is not VAST's refused. Per view (``views: true``): each view's bytes, operations, latency and logical
use from ``/api/prometheusmetrics/views``, its counters never going backwards when a view leaves the answer or counts
anew; through the poller, a views endpoint that is missing, hung or garbage loses the views alone, never the
cluster's series; the option's errors name file, line and key. Expected values are worked out by hand from
tests/fixtures/vast."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import vast
from lockstep.exporters.storagesys.app import POLLER, create_app
from lockstep.exporters.storagesys.config import StorageConfig, Target
from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.storagesys.monotonic import CounterSums
from lockstep.exporters.toolkit.credentials import Credentials
from tests.helpers.paths import FIXTURES
from tests.helpers.storagefake import Behaviour, FakeStorage
from tests.helpers.storagescrape import scrape, value

NEW = (FIXTURES / "vast" / "prometheusmetrics-cluster.prom").read_text()
OLD = (FIXTURES / "vast" / "prometheusmetrics-cluster-protoall.prom").read_text()
VIEWS = (FIXTURES / "vast" / "prometheusmetrics-views.prom").read_text()
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
            for proto, number in (("ProtoCommon", v), ("NFSCommon", other_protocol)):
                lines.append(f'vast_cnode_metrics_ProtoMetrics_{name}{{cluster="c",hostname="cn{i}",proto_name="{proto}"}} '
                             f"{number}")
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


# Per view: /api/prometheusmetrics/views (tests/fixtures/vast/prometheusmetrics-views.prom)

DATASETS, LOGS = ("lab", "view", "/datasets"), ("lab", "view", "/logs")


def test_each_views_bytes_operations_latency_and_logical_use_are_read_from_its_rows():
    """The fixture's rows of /datasets and /logs as they stand; their metadata IOPS, latency counts, physical capacity
    and QoS wait are not read."""
    got = values(vast.read_views("lab", VIEWS))
    assert got == {
        (m.READ_BYTES.name, DATASETS): 6_000_000_000_000,
        (m.WRITE_BYTES.name, DATASETS): 50_000_000_000,
        (m.OPERATIONS.name, (*DATASETS, "read")): 6_000_000,
        (m.OPERATIONS.name, (*DATASETS, "write")): 400_000,
        (m.LATENCY.name, (*DATASETS, "read")): pytest.approx(3_000),      # 3,000,000,000 µs
        (m.LATENCY.name, (*DATASETS, "write")): pytest.approx(400),       # 400,000,000 µs
        (m.USED.name, DATASETS): 500_000_000_000_000,
        (m.READ_BYTES.name, LOGS): 20_000_000_000,
        (m.WRITE_BYTES.name, LOGS): 2_000_000_000_000,
        (m.OPERATIONS.name, (*LOGS, "read")): 300_000,
        (m.OPERATIONS.name, (*LOGS, "write")): 30_000_000,
        (m.LATENCY.name, (*LOGS, "read")): pytest.approx(150),           # 150,000,000 µs
        (m.LATENCY.name, (*LOGS, "write")): pytest.approx(27_000),       # 27,000,000,000 µs
        (m.USED.name, LOGS): 40_000_000_000_000,
    }
    # the mean per operation, as VAST's panels show it: 500 µs per read of /datasets, 900 µs per write of /logs
    assert got[(m.LATENCY.name, (*DATASETS, "read"))] / got[(m.OPERATIONS.name, (*DATASETS, "read"))] == \
        pytest.approx(500e-6)
    assert got[(m.LATENCY.name, (*LOGS, "write"))] / got[(m.OPERATIONS.name, (*LOGS, "write"))] == pytest.approx(900e-6)


def test_a_view_leaving_the_answer_or_counting_anew_never_makes_its_counters_go_backwards():
    sums = CounterSums()
    first = values(sums.combine(vast.read_view_sources("lab", VIEWS)))
    without_logs = "".join(line + "\n" for line in VIEWS.splitlines() if 'path="/logs"' not in line)
    gone = values(sums.combine(vast.read_view_sources("lab", without_logs)))
    assert (m.READ_BYTES.name, LOGS) not in gone
    assert gone[(m.READ_BYTES.name, DATASETS)] == first[(m.READ_BYTES.name, DATASETS)]
    # /logs back having read 1 GB more while away; /datasets made anew at its path, having read 1,000 bytes since
    row = 'vast_view_metrics_ViewMetrics_read_bw_sum{cluster="vast-lab",path="%s",tenant_name="default"} '
    back = VIEWS.replace(row % "/logs" + "20000000000", row % "/logs" + "21000000000") \
        .replace(row % "/datasets" + "6000000000000", row % "/datasets" + "1000")
    assert back.count("21000000000\n") == 1 and back.count(" 1000\n") == 2   # (the QoS count of /datasets is 1000 too)
    again = values(sums.combine(vast.read_view_sources("lab", back)))
    assert again[(m.READ_BYTES.name, LOGS)] == 21_000_000_000
    assert again[(m.READ_BYTES.name, DATASETS)] == 6_000_000_000_000 + 1_000
    assert again[(m.WRITE_BYTES.name, LOGS)] == 2_000_000_000_000   # unchanged while away: nothing added


def test_one_path_in_two_tenants_is_one_series_of_their_sums():
    research = "".join(line.replace('tenant_name="default"', 'tenant_name="research"') + "\n"
                       for line in VIEWS.splitlines() if 'path="/datasets"' in line)
    got = values(vast.read_views("lab", VIEWS + research))
    assert got[(m.READ_BYTES.name, DATASETS)] == 2 * 6_000_000_000_000
    assert got[(m.OPERATIONS.name, (*DATASETS, "write"))] == 2 * 400_000
    assert got[(m.USED.name, DATASETS)] == 2 * 500_000_000_000_000
    assert got[(m.READ_BYTES.name, LOGS)] == 20_000_000_000


def test_only_the_view_families_read_must_parse_and_the_user_view_gauges_are_never_read():
    """``vast_user_view_*`` (§6b: per user and view, labels as VAST's join names them) adds nothing, a broken line
    of a family not read costs nothing; a broken line of a family read refuses the answer."""
    user_view = ('vast_user_view_read_bw{cluster="vast-lab",username="alice",uid="1000",path="/datasets",'
                 'protocol="NFS3"} 123456789\n')
    broken_qos = 'vast_view_metrics_ViewMetrics_qos_wait_for_budget_time_sum{cluster="vast-lab",path="/logs" 12\n'
    assert values(vast.read_views("lab", VIEWS + user_view + broken_qos)) == values(vast.read_views("lab", VIEWS))
    broken = 'vast_view_metrics_ViewMetrics_write_bw_sum{cluster="vast-lab",path="/scratch" 12\n'
    with pytest.raises(AnswerError, match="line 27"):
        vast.read_views("lab", VIEWS + broken)


@pytest.mark.parametrize("answer", [
    NEW,                                   # the cluster endpoint's answer: no view family
    "<html><body>404 Not Found</body></html>\n",
    'vast_view_metrics_ViewMetrics_read_bw_sum{cluster="vast-lab",tenant_name="default"} 5\n',   # no path: no view
])
def test_an_answer_without_view_counters_or_capacity_is_refused(answer):
    with pytest.raises(AnswerError):
        vast.read_views("lab", answer)


view_counters = st.tuples(*(st.integers(0, 10**15) for _ in range(6)))
view_path = st.text(alphabet="abcxyz019/._- é", min_size=1, max_size=12).map(lambda p: "/" + p)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(view_path, view_counters, min_size=1, max_size=8))
def test_any_views_are_read_back_per_path(views):
    """Whatever views an answer holds (read/write bytes, operations, latency in µs), each is one series per path with
    its own values, the latency in seconds."""
    families = ("read_bw_sum", "write_bw_sum", "read_iops_count", "write_iops_count", "read_latency_sum",
                "write_latency_sum")
    text = "".join(f'vast_view_metrics_ViewMetrics_{family}{{cluster="c",path="{path}"}} {value}\n'
                   for path, row in views.items() for family, value in zip(families, row))
    got = values(vast.read_views("t", text))
    assert {labels[2] for _, labels in got} == set(views)
    for path, (rb, wb, ro, wo, rl, wl) in views.items():
        key = ("t", "view", path)
        assert got[(m.READ_BYTES.name, key)] == rb and got[(m.WRITE_BYTES.name, key)] == wb
        assert got[(m.OPERATIONS.name, (*key, "read"))] == ro and got[(m.OPERATIONS.name, (*key, "write"))] == wo
        assert got[(m.LATENCY.name, (*key, "read"))] == pytest.approx(rl * 1e-6)
        assert got[(m.LATENCY.name, (*key, "write"))] == pytest.approx(wl * 1e-6)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["/a", "/b", "/c"]), st.integers(0, 10**12), min_size=1, max_size=3),
                min_size=1, max_size=12))
def test_a_views_bytes_never_go_backwards_whatever_its_answers_hold(answers):
    """Each answer any views with any bytes read (more, fewer as a view made anew, or the view absent): each view's
    exported bytes never drop, and are its first value plus every rise, a drop adding the new value
    (monotonic.py's rule)."""
    sums, exported, expected, last = CounterSums(), {}, {}, {}
    for answer in answers:
        text = "".join(f'vast_view_metrics_ViewMetrics_read_bw_sum{{cluster="c",path="{p}"}} {v}\n'
                       for p, v in answer.items())
        got = values(sums.combine(vast.read_view_sources("t", text)))
        for path, count in answer.items():
            before = last.get(path)
            expected[path] = expected.get(path, 0) + (count if before is None or count < before else count - before)
            last[path] = count
            now = got[(m.READ_BYTES.name, ("t", "view", path))]
            assert now >= exported.get(path, 0) and now == expected[path]
            exported[path] = now


# The views option and the poller (the fake VMS of tests/helpers/storagefake.py, over HTTP)

BASIC = ("lockstep-ro", "s3cr3t-vms")


def vms(base: str, name: str, views: bool = True) -> Target:
    return Target(name, "vast", f"{base}/{name}", basic_auth=Credentials(*BASIC), views=views)


async def polled(client) -> dict[tuple, float]:
    await client.app[POLLER].poll_all()
    return await scrape(client)


def views_of(samples, target: str) -> set[str]:
    return {dict(labels)["name"] for _, labels in samples if ("scope", "view") in labels and ("target", target) in labels}


CLUSTER_READ = 7_500_000_000_000 + 7_000_000_000_000     # the cluster fixture's two CNodes


async def serve(aiohttp_server, aiohttp_client, timeout_s: float = 5.0, **targets: Behaviour):
    storage = FakeStorage()
    for name, behaviour in targets.items():
        storage.add(name, behaviour)
    server = await aiohttp_server(storage.app())
    base = f"http://127.0.0.1:{server.port}"
    config = StorageConfig(tuple(vms(base, name, views=name != "plain") for name in targets), interval_s=60.0,
                           timeout_s=timeout_s)
    return storage, await aiohttp_client(create_app(config, background=False))


async def test_views_true_reads_every_view_beside_the_cluster_with_the_same_basic_auth(aiohttp_server, aiohttp_client):
    storage, client = await serve(aiohttp_server, aiohttp_client,
                                  vms=Behaviour(body=NEW, kind="vast", basic=BASIC, views=VIEWS),
                                  plain=Behaviour(body=NEW, kind="vast", basic=BASIC, views=VIEWS))
    got = await polled(client)
    assert value(got, m.UP, target="vms") == 1.0
    assert value(got, m.READ_BYTES, target="vms", scope="cluster", name="vast-lab") == CLUSTER_READ
    assert views_of(got, "vms") == {"/datasets", "/logs"}
    assert value(got, m.WRITE_BYTES, target="vms", scope="view", name="/logs") == 2_000_000_000_000
    assert value(got, m.OPERATIONS, target="vms", scope="view", name="/datasets", op="read") == 6_000_000
    assert value(got, m.LATENCY, target="vms", scope="view", name="/logs", op="write") == pytest.approx(27_000)
    assert value(got, m.USED, target="vms", scope="view", name="/datasets") == 500_000_000_000_000
    assert value(got, m.CAPACITY, target="vms", scope="view", name="/datasets") is None
    assert storage.views_requests == {"vms": 1}       # a target without views: true never asks for them
    assert views_of(got, "plain") == set() and value(got, m.UP, target="plain") == 1.0


@pytest.mark.parametrize(("views", "mode", "reason"), [(None, "answer", "http"),     # 404: a VMS without /views
                                                       (VIEWS, "garbage", "parse")])
async def test_a_failing_views_endpoint_loses_the_views_alone_counted_and_logged_once(
        aiohttp_server, aiohttp_client, caplog, views, mode, reason):
    storage, client = await serve(aiohttp_server, aiohttp_client,
                                  vms=Behaviour(body=NEW, kind="vast", basic=BASIC, views=views, views_mode=mode))
    caplog.set_level(logging.DEBUG)
    for _ in range(2):
        got = await polled(client)
        assert value(got, m.UP, target="vms") == 1.0
        assert value(got, m.READ_BYTES, target="vms", scope="cluster", name="vast-lab") == CLUSTER_READ
        assert value(got, m.CAPACITY, target="vms", scope="cluster", name="vast-lab") == 2e15
        assert views_of(got, "vms") == set()
    assert value(got, m.POLL_FAILURES, target="vms", reason=reason) == 2.0
    logged = [r for r in caplog.records if r.name == "lockstep.storage"]
    assert [(r.levelno, r.fields["part"], r.fields["reason"]) for r in logged] == [(logging.WARNING, "views", reason)]
    assert "s3cr3t-vms" not in caplog.text
    # the views answer again: their series are back, the failures stay counted, the recovery logged
    storage.targets["vms"].views, storage.targets["vms"].views_mode = VIEWS, "answer"
    got = await polled(client)
    assert views_of(got, "vms") == {"/datasets", "/logs"}
    assert value(got, m.POLL_FAILURES, target="vms", reason=reason) == 2.0
    assert [r.getMessage() for r in caplog.records if r.name == "lockstep.storage"][-1] == "storage target part recovered"


async def test_a_cluster_endpoint_failing_is_the_targets_failure_whatever_the_views_answer(aiohttp_server, aiohttp_client):
    _, client = await serve(aiohttp_server, aiohttp_client,
                            vms=Behaviour(kind="vast", basic=BASIC, mode="garbage", views=VIEWS))
    got = await polled(client)
    assert value(got, m.UP, target="vms") == 0.0
    assert value(got, m.POLL_FAILURES, target="vms", reason="parse") == 1.0
    assert views_of(got, "vms") == set()


async def test_views_gone_for_a_poll_come_back_where_they_were(aiohttp_server, aiohttp_client):
    storage, client = await serve(aiohttp_server, aiohttp_client,
                                  vms=Behaviour(body=NEW, kind="vast", basic=BASIC, views=VIEWS))
    await polled(client)
    storage.targets["vms"].views_mode = "garbage"
    await polled(client)
    row = 'vast_view_metrics_ViewMetrics_write_bw_sum{cluster="vast-lab",path="/logs",tenant_name="default"} '
    storage.targets["vms"].views, storage.targets["vms"].views_mode = \
        VIEWS.replace(row + "2000000000000", row + "2000000001000"), "answer"
    got = await polled(client)
    assert value(got, m.WRITE_BYTES, target="vms", scope="view", name="/logs") == 2_000_000_001_000


@pytest.mark.slow  # waits out a real (short) timeout
async def test_hung_views_time_out_alone_within_the_polls_timeout(aiohttp_server, aiohttp_client):
    storage, client = await serve(aiohttp_server, aiohttp_client, timeout_s=2.0,
                                  vms=Behaviour(body=NEW, kind="vast", basic=BASIC, views=VIEWS, views_mode="hang"))
    try:
        got = await polled(client)
    finally:
        storage.hung.set()
    assert value(got, m.UP, target="vms") == 1.0
    assert value(got, m.READ_BYTES, target="vms", scope="cluster", name="vast-lab") == CLUSTER_READ
    assert value(got, m.POLL_FAILURES, target="vms", reason="timeout") == 1.0
    assert views_of(got, "vms") == set()
    assert 2.0 <= value(got, m.POLL_DURATION, target="vms") < 3.0
