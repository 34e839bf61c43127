"""WEKA's JSON-RPC answers mapped to the common metrics (``exporters/storagesys/weka.py``, and the envelope and token
parsing of ``wekarpc.py``), on the constructed answers of tests/fixtures/weka (README.md there). Every expected value
is worked out by hand from the fixture's numbers: a minute adds rate × 60, its latency µs × 1e-6 × ops × 60."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import weka, wekarpc
from lockstep.exporters.storagesys.errors import AnswerError, HttpStatusError
from tests.helpers.paths import FIXTURES

DIR = FIXTURES / "weka"
STATS = json.loads((DIR / "stats-show-ops.json").read_text())               # 15:19 .. 15:23
LATER = json.loads((DIR / "stats-show-ops-later.json").read_text())         # 15:22 .. 15:26
CAPACITY = json.loads((DIR / "filesystems-get-capacity.json").read_text())
KEY = ("w", "cluster", "w")

# after the first answer: its newest minute (15:23) alone
FIRST = {
    (m.READ_BYTES.name, KEY): 2_000_000 * 60,                          # 120_000_000
    (m.WRITE_BYTES.name, KEY): 100_000 * 60,                           # 6_000_000
    (m.OPERATIONS.name, (*KEY, "read")): 200.5 * 60,                   # 12_030
    (m.OPERATIONS.name, (*KEY, "write")): 10 * 60,                     # 600
    (m.LATENCY.name, (*KEY, "read")): pytest.approx(3.0075),           # 250 µs × 12_030
    (m.LATENCY.name, (*KEY, "write")): pytest.approx(0.3),             # 500 µs × 600
}
# then the later answer: 15:24, 15:25, 15:26 added (15:22 and 15:23 already seen)
SECOND = {
    (m.READ_BYTES.name, KEY): 120_000_000 + (3_000_000 + 0 + 1_500_000) * 60,          # 390_000_000
    (m.WRITE_BYTES.name, KEY): 6_000_000 + (200_000 + 0 + 800_000) * 60,               # 66_000_000
    (m.OPERATIONS.name, (*KEY, "read")): 12_030 + (300 + 0 + 150) * 60,                # 39_030
    (m.OPERATIONS.name, (*KEY, "write")): 600 + (20 + 0 + 40) * 60,                    # 4_200
    # 15:24: 100 µs × 18_000 = 1.8 s; 15:25: null (no reads); 15:26: 200 µs × 9_000 = 1.8 s
    (m.LATENCY.name, (*KEY, "read")): pytest.approx(3.0075 + 1.8 + 1.8),
    # 15:24: null, skipped though its 1_200 writes count; 15:25: null; 15:26: 1000 µs × 2_400 = 2.4 s
    (m.LATENCY.name, (*KEY, "write")): pytest.approx(0.3 + 2.4),
}


def counted(counts: weka.Counts) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in counts.samples("w")}


def answer(minutes: dict[int, dict]) -> dict:
    """A stats_show result with one item per minute after 2021-08-16T15:00:00Z."""
    start = datetime(2021, 8, 16, 15, 0, tzinfo=timezone.utc)
    return {"all": {"ops": [{"stats": stats, "timestamp": (start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
                            for i, stats in minutes.items()]}}


def test_the_request_asks_for_the_clusters_ops_over_five_minutes():
    assert weka.stats_params() == {"stat": ["ops.READS", "ops.WRITES", "ops.READ_BYTES", "ops.WRITE_BYTES",
                                            "ops.READ_LATENCY", "ops.WRITE_LATENCY"], "interval": "5m"}


def test_buckets_are_read_oldest_first_with_their_timestamps():
    buckets = weka.parse_stats(STATS)
    assert [b.at.strftime("%H:%M") for b in buckets] == ["15:19", "15:20", "15:21", "15:22", "15:23"]
    assert buckets[-1].at.tzinfo is not None
    assert buckets[-1].stats == {"READS": 200.5, "WRITES": 10, "READ_BYTES": 2_000_000, "WRITE_BYTES": 100_000,
                                 "READ_LATENCY": 250, "WRITE_LATENCY": 500}
    later = weka.parse_stats(LATER)
    assert "WRITE_LATENCY" not in later[2].stats and later[2].stats["WRITES"] == 20      # 15:24: null skipped


def test_the_first_answer_counts_only_its_newest_minute():
    counts = weka.Counts()
    counts.add(weka.parse_stats(STATS))
    assert counted(counts) == FIRST


def test_a_later_answer_counts_only_its_newer_minutes():
    counts = weka.Counts()
    counts.add(weka.parse_stats(STATS))
    counts.add(weka.parse_stats(LATER))
    assert counted(counts) == SECOND
    counts.add(weka.parse_stats(LATER))          # the same answer again: nothing newer
    assert counted(counts) == SECOND


def test_minutes_missed_while_down_are_counted_when_they_come_back_and_older_ones_never_again():
    """Counted up to minute 23; polls fail; the next answer holds 24 to 28 (all five counted); after a longer outage
    one holds 35 to 39 (29 to 34 are gone: only those five counted); then an answer of older minutes adds nothing."""
    counts = weka.Counts()
    counts.add(weka.parse_stats(answer({23: {"READ_BYTES": 1}})))
    counts.add(weka.parse_stats(answer({i: {"READ_BYTES": i} for i in range(24, 29)})))
    assert counted(counts) == {(m.READ_BYTES.name, KEY): 60 * (1 + 24 + 25 + 26 + 27 + 28)}          # 7_860
    counts.add(weka.parse_stats(answer({i: {"READ_BYTES": i} for i in range(35, 40)})))
    assert counted(counts) == {(m.READ_BYTES.name, KEY): 7_860 + 60 * (35 + 36 + 37 + 38 + 39)}       # 18_960
    counts.add(weka.parse_stats(answer({i: {"READ_BYTES": 1000} for i in range(30, 35)})))
    assert counted(counts) == {(m.READ_BYTES.name, KEY): 18_960}


def test_nulls_and_values_that_are_not_rates_are_skipped_and_absent_counters_stay_absent():
    counts = weka.Counts()
    counts.add(weka.parse_stats(answer({1: {"READS": 5, "READ_LATENCY": None, "WRITES": None, "WRITE_BYTES": -3,
                                            "READ_BYTES": [{"value": 1}], "WRITE_LATENCY": 7}})))
    # reads: 300 operations; no latency (null); writes: null, so neither their count nor their latency
    assert counted(counts) == {(m.OPERATIONS.name, (*KEY, "read")): 300}


def test_an_answer_without_ops_counts_nothing_and_the_next_is_the_first():
    counts = weka.Counts()
    counts.add(weka.parse_stats({"all": {}}))
    assert counted(counts) == {} and counts.newest is None
    counts.add(weka.parse_stats(STATS))
    assert counted(counts) == FIRST


@pytest.mark.parametrize("result", [
    [], {"NodeId<1>": {"ops": []}}, {"all": {"ops": {"stats": {}}}}, {"all": {"ops": [{"timestamp": "2021-08-16T15:23:00Z"}]}},
    {"all": {"ops": [{"stats": {}, "timestamp": "yesterday"}]}}, {"all": {"ops": [{"stats": {}, "timestamp": 1629127380}]}},
])
def test_a_result_that_is_not_a_stats_answer_is_refused(result):
    with pytest.raises(AnswerError):
        weka.parse_stats(result)


def test_capacity_is_used_total_of_available_total_per_file_system():
    got = {(s.metric.name, s.labels): s.value for s in weka.parse_capacity("w", CAPACITY)}
    assert got == {
        (m.USED.name, ("w", "filesystem", "default")): 1_099_511_627_776,
        (m.CAPACITY.name, ("w", "filesystem", "default")): 10_995_116_277_760,
        (m.USED.name, ("w", "filesystem", "checkpoints")): 5_000_000_000_000,
        (m.CAPACITY.name, ("w", "filesystem", "checkpoints")): 20_000_000_000_000,
    }


def test_capacity_entries_without_a_name_or_size_are_left_out_and_a_non_object_refused():
    got = weka.parse_capacity("w", {"FSId<0>": {"used_total": 1}, "FSId<1>": {"name": "a", "used_total": None,
                                                                             "available_total": 10}, "FSId<2>": 3})
    assert [(s.metric.name, s.labels, s.value) for s in got] == [(m.CAPACITY.name, ("w", "filesystem", "a"), 10)]
    with pytest.raises(AnswerError):
        weka.parse_capacity("w", [])


def test_login_tokens_from_the_result_and_from_the_documentations_list_form():
    t = wekarpc.tokens(json.loads((DIR / "userlogin-result.json").read_text()))
    assert (t.access, t.token_type, t.refresh, t.header()) == ("ACCESS-TOKEN", "Bearer", "REFRESH-TOKEN",
                                                               "Bearer ACCESS-TOKEN")
    assert "ACCESS-TOKEN" not in repr(t) and "REFRESH-TOKEN" not in repr(t)
    docs = json.loads((DIR / "rest-login-response.docs-example.json").read_text())
    assert wekarpc.tokens(docs["data"]).access == "ACCESS-TOKEN"
    with pytest.raises(HttpStatusError, match="no tokens"):
        wekarpc.tokens({})
    with pytest.raises(AnswerError):
        wekarpc.tokens({"token_type": "Bearer"})


def test_a_json_rpc_error_is_an_http_failure_quoted_except_for_logins_and_anything_else_a_parse_failure():
    err = json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad stat x"}}).encode()
    with pytest.raises(HttpStatusError, match=r"-32602 from stats_show: bad stat x"):
        wekarpc.answer("stats_show", err)
    with pytest.raises(HttpStatusError) as exc:
        wekarpc.answer("userlogin", json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "pw1"}}).encode())
    assert "pw1" not in str(exc.value)
    assert wekarpc.answer("x", b'{"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}') == {"a": 1}
    for body in (b"<html>502</html>", b"[1]", b'{"jsonrpc": "2.0", "id": 1}', b'{"jsonrpc": "1.0", "result": 1}', b"\xff"):
        with pytest.raises(AnswerError):
            wekarpc.answer("x", body)


# ---- any sequence of overlapping answers -------------------------------------------------------------------------

value = st.none() | st.integers(0, 10**9)
minute = st.fixed_dictionaries({s: value for s in weka.STATS})


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_counters_are_the_sum_over_distinct_minutes_after_the_first_answers_newest_and_never_decrease(data):
    """Answers of five-minute windows, each ending within five minutes after the newest minute seen (so no minute
    falls between two answers) or up to six before it (a stale answer), items in any order: after each answer every
    counter is the sum over the distinct minutes from the first answer's newest to the newest seen, and none
    decreased."""
    ends = answer_ends(data)
    minutes = data.draw(st.lists(minute, min_size=max(ends) + 1, max_size=max(ends) + 1), label="minutes")
    counts, before = weka.Counts(), {}
    for k, end in enumerate(ends):
        window = data.draw(st.permutations(range(max(0, end - 4), end + 1)), label="order")
        counts.add(weka.parse_stats(answer({i: minutes[i] for i in window})))
        got = counted(counts)
        seen = range(ends[0], max(ends[: k + 1]) + 1)
        for metric, op, rate, latency in COUNTERS:
            key = (metric.name, (*KEY, op) if op else KEY)
            terms = [t for i in seen if (t := term(minutes[i], rate, latency)) is not None]
            assert_counter(got, before, key, terms, rel=1e-12)
        before = got


def answer_ends(data) -> list[int]:
    """Where each answer's five-minute window ends: each within five minutes after the newest end so far (no minute
    falls between two answers) or up to six before it (a stale answer)."""
    ends = [data.draw(st.integers(4, 10), label="first end")]
    for _ in range(data.draw(st.integers(0, 8), label="answers")):
        ends.append(max(0, max(ends) + data.draw(st.integers(-6, 5), label="step")))
    return ends


# each common counter: (metric, op, the stat of its rate, the stat of its mean latency where it is a latency total)
COUNTERS = ((m.READ_BYTES, "", "READ_BYTES", None), (m.WRITE_BYTES, "", "WRITE_BYTES", None),
            (m.OPERATIONS, "read", "READS", None), (m.OPERATIONS, "write", "WRITES", None),
            (m.LATENCY, "read", "READS", "READ_LATENCY"), (m.LATENCY, "write", "WRITES", "WRITE_LATENCY"))


def term(stats: dict, rate: str, latency: str | None) -> float | None:
    """What one minute's ``stats`` add to a counter: the rate × 60 s (a latency total: × its mean × 1e-6), None where
    a value it needs is null."""
    if stats[rate] is None or (latency is not None and stats[latency] is None):
        return None
    return stats[rate] * 60 * (1 if latency is None else stats[latency] * 1e-6)


def assert_counter(got: dict, before: dict, key: tuple, terms: list[float], rel: float) -> None:
    """The counter at ``key`` is the sum of ``terms`` (absent without any), and not below its value ``before``."""
    if terms:
        assert got[key] == pytest.approx(sum(terms), rel=rel)
    else:
        assert key not in got
    assert got.get(key, 0.0) >= before.get(key, 0.0)


# ---- per host (per_host: true): stats_show per node, nodes_list, hosts_list -------------------------------------

NODE_STATS = json.loads((DIR / "stats-show-ops-per-node.json").read_text())           # 15:22 .. 15:23
NODE_STATS_LATER = json.loads((DIR / "stats-show-ops-per-node-later.json").read_text())  # 15:23 .. 15:25
NODES = json.loads((DIR / "nodes-list.json").read_text())
HOSTS = json.loads((DIR / "hosts-list.json").read_text())


def host(name: str) -> tuple[str, str, str]:
    return ("w", "host", name)


# the first answer: its newest minute (15:23) alone, each host the sum of its FRONTEND nodes
HOSTS_FIRST = {
    # node00: NodeId<10> and NodeId<11>
    (m.READ_BYTES.name, host("node00")): (2_000_000 + 500_000) * 60,                  # 150_000_000
    (m.WRITE_BYTES.name, host("node00")): (200_000 + 300_000) * 60,                   # 30_000_000
    (m.OPERATIONS.name, (*host("node00"), "read")): (200 + 50) * 60,                  # 15_000
    (m.OPERATIONS.name, (*host("node00"), "write")): (20 + 30) * 60,                  # 3_000
    # 100 µs × 12_000 + 400 µs × 3_000 = 1.2 s + 1.2 s (each node's mean times its own operations)
    (m.LATENCY.name, (*host("node00"), "read")): pytest.approx(2.4),
    (m.LATENCY.name, (*host("node00"), "write")): pytest.approx(3.3),                 # 500 µs × 1_200 + 1500 µs × 1_800
    # node01: NodeId<20>'s 15:23 only (no reads in it: no_zeroes left them out), its 15:22 before the first newest
    (m.WRITE_BYTES.name, host("node01")): 500_000 * 60,                               # 30_000_000
    (m.OPERATIONS.name, (*host("node01"), "write")): 5 * 60,                          # 300
    (m.LATENCY.name, (*host("node01"), "write")): pytest.approx(0.6),                 # 2000 µs × 300
    # weka-backend-1: its FRONTEND NodeId<3> only (its COMPUTE NodeId<1> is not counted); weka-backend-2: no frontend
    (m.READ_BYTES.name, host("weka-backend-1")): 100_000 * 60,                        # 6_000_000
    (m.OPERATIONS.name, (*host("weka-backend-1"), "read")): 10 * 60,                  # 600
    (m.LATENCY.name, (*host("weka-backend-1"), "read")): pytest.approx(0.18),         # 300 µs × 600
}
# then the later answer: 15:24 and 15:25 added (15:23 already counted); NodeId<30> is in no nodes_list: skipped
HOSTS_SECOND = {
    **HOSTS_FIRST,
    # node00: 15:24 NodeId<10>; 15:25 NodeId<10> (reads) and NodeId<11> (writes)
    (m.READ_BYTES.name, host("node00")): 150_000_000 + (3_000_000 + 1_000_000) * 60,  # 390_000_000
    (m.WRITE_BYTES.name, host("node00")): 30_000_000 + (100_000 + 1_000_000) * 60,    # 96_000_000
    (m.OPERATIONS.name, (*host("node00"), "read")): 15_000 + (300 + 100) * 60,        # 39_000
    (m.OPERATIONS.name, (*host("node00"), "write")): 3_000 + (10 + 10) * 60,          # 4_200
    (m.LATENCY.name, (*host("node00"), "read")): pytest.approx(2.4 + 3.6 + 0.6),      # 200 µs × 18_000, 100 µs × 6_000
    # 15:24's write latency is null (its 600 writes count, their latency not); 15:25: 1000 µs × 600
    (m.LATENCY.name, (*host("node00"), "write")): pytest.approx(3.3 + 0.6),
    # node01: 15:24's reads
    (m.READ_BYTES.name, host("node01")): 2_000_000 * 60,                              # 120_000_000
    (m.OPERATIONS.name, (*host("node01"), "read")): 20 * 60,                          # 1_200
    (m.LATENCY.name, (*host("node01"), "read")): pytest.approx(0.6),                  # 500 µs × 1_200
}
# node02 (NodeId<30>), where nodes_list names it: first seen in the later answer, so both its minutes newer than the
# first answer's newest (15:23) count
NODE02 = {
    (m.READ_BYTES.name, host("node02")): (400_000 + 600_000) * 60,                    # 60_000_000
    (m.OPERATIONS.name, (*host("node02"), "read")): (40 + 60) * 60,                   # 6_000
    (m.LATENCY.name, (*host("node02"), "read")): pytest.approx(2.4),                  # 250 µs × 2_400 + 500 µs × 3_600
}
ROLES = {"weka-backend-1": "server", "weka-backend-2": "server", "node00": "client", "node01": "client"}


def host_counted(counts: weka.HostCounts, roles=None) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in counts.samples("w", roles or {})}


def test_the_per_node_request_adds_per_node_no_zeroes_and_show_internal_to_the_clusters():
    assert weka.node_stats_params() == {"stat": ["ops.READS", "ops.WRITES", "ops.READ_BYTES", "ops.WRITE_BYTES",
                                                 "ops.READ_LATENCY", "ops.WRITE_LATENCY"], "interval": "5m",
                                        "per_node": True, "no_zeroes": True, "show_internal": True}


def test_nodes_list_maps_frontend_nodes_to_their_hosts_and_knows_the_others():
    nodes = weka.parse_nodes(NODES)
    assert nodes.frontend == {"NodeId<3>": "weka-backend-1", "NodeId<10>": "node00", "NodeId<11>": "node00",
                              "NodeId<20>": "node01"}
    assert nodes.known == {"NodeId<1>", "NodeId<2>", "NodeId<3>", "NodeId<4>", "NodeId<10>", "NodeId<11>", "NodeId<20>"}
    # roles as one name, a node without a hostname (known, no host), and a node with several roles
    odd = weka.parse_nodes({"NodeId<5>": {"hostname": "h", "roles": "FRONTEND"}, "NodeId<6>": {"roles": ["FRONTEND"]},
                            "NodeId<7>": {"hostname": "g", "roles": ["COMPUTE", "FRONTEND"]}, "NodeId<8>": 3})
    assert odd.frontend == {"NodeId<5>": "h", "NodeId<7>": "g"} and len(odd.known) == 4
    with pytest.raises(AnswerError):
        weka.parse_nodes([])


def test_hosts_list_says_backend_hosts_are_servers_and_the_others_clients():
    assert weka.parse_hosts(HOSTS) == ROLES
    assert weka.parse_hosts([{"hostname": "a", "mode": "client"}, {"hostname": "a", "mode": "backend"},
                             {"hostname": "b"}, {"mode": "backend"}, "c"]) == {"a": "server"}
    with pytest.raises(AnswerError):
        weka.parse_hosts("hosts")


def test_the_first_per_node_answer_counts_its_newest_minute_per_host_over_frontend_nodes_only():
    counts = weka.HostCounts()
    counts.add(weka.parse_node_stats(NODE_STATS), weka.parse_nodes(NODES).frontend)
    assert host_counted(counts) == HOSTS_FIRST


def test_a_later_per_node_answer_counts_each_hosts_newer_minutes_once():
    counts, frontend = weka.HostCounts(), weka.parse_nodes(NODES).frontend
    counts.add(weka.parse_node_stats(NODE_STATS), frontend)
    counts.add(weka.parse_node_stats(NODE_STATS_LATER), frontend)
    assert host_counted(counts) == HOSTS_SECOND
    counts.add(weka.parse_node_stats(NODE_STATS_LATER), frontend)   # the same answer again: nothing newer
    assert host_counted(counts) == HOSTS_SECOND


def test_minutes_every_host_has_counted_are_read_without_their_values_and_count_the_same():
    counts, frontend = weka.HostCounts(), weka.parse_nodes(NODES).frontend
    assert counts.floor() is None                   # nothing counted yet: every minute may count
    counts.add(weka.parse_node_stats(NODE_STATS, counts.floor()), frontend)
    floor = counts.floor()
    assert floor == datetime(2021, 8, 16, 15, 23, tzinfo=timezone.utc)   # the first answer's newest, for every host
    later = weka.parse_node_stats(NODE_STATS_LATER, floor)
    assert all(not b.stats for buckets in later.values() for b in buckets if b.at <= floor)
    assert any(b.stats for buckets in later.values() for b in buckets)
    counts.add(later, frontend)
    assert host_counted(counts) == HOSTS_SECOND


def test_a_host_first_seen_in_a_later_answer_counts_its_minutes_since_the_earlier_answers():
    counts = weka.HostCounts()
    counts.add(weka.parse_node_stats(NODE_STATS), weka.parse_nodes(NODES).frontend)
    nodes = weka.parse_nodes({**NODES, "NodeId<30>": {"hostname": "node02", "roles": ["FRONTEND"]}})
    counts.add(weka.parse_node_stats(NODE_STATS_LATER), nodes.frontend)
    assert host_counted(counts) == {**HOSTS_SECOND, **NODE02}


def test_each_host_with_series_has_its_role_where_hosts_list_names_it():
    counts = weka.HostCounts()
    counts.add(weka.parse_node_stats(NODE_STATS), weka.parse_nodes(NODES).frontend)
    info = {labels: v for (name, labels), v in host_counted(counts, ROLES).items() if name == m.HOST_INFO.name}
    # weka-backend-2 has no frontend (no series, no info)
    assert info == {("w", "node00", "client"): 1.0, ("w", "node01", "client"): 1.0,
                    ("w", "weka-backend-1", "server"): 1.0}
    assert not [k for k in host_counted(counts, {"node00": "client"}) if k[0] == m.HOST_INFO.name and "node01" in k[1]]


@pytest.mark.parametrize("result", [
    [], {"all": {"ops": []}}, {"NodeId<1>": []}, {"NodeId<1>": {"ops": {"stats": {}}}},
    {"NodeId<1>": {"ops": [{"stats": {}, "timestamp": "yesterday"}]}},
])
def test_a_result_that_is_not_a_per_node_stats_answer_is_refused(result):
    with pytest.raises(AnswerError):
        weka.parse_node_stats(result)


def test_an_empty_per_node_answer_counts_nothing_and_the_next_is_the_first():
    counts, frontend = weka.HostCounts(), weka.parse_nodes(NODES).frontend
    counts.add(weka.parse_node_stats({}), frontend)
    counts.add(weka.parse_node_stats({"NodeId<10>": {}}), frontend)    # a node without ops: no minutes
    assert host_counted(counts) == {} and counts.seen is None
    counts.add(weka.parse_node_stats(NODE_STATS), frontend)
    assert host_counted(counts) == HOSTS_FIRST


def per_node_answer(present: dict[tuple[int, int], dict], window) -> dict:
    """A per-node stats_show result: node k's minute i where ``present`` holds it and i is in ``window``."""
    start = datetime(2021, 8, 16, 15, 0, tzinfo=timezone.utc)
    out: dict = {}
    for (node, i), stats in sorted(present.items()):
        if i in window:
            out.setdefault(f"NodeId<{node}>", {"ops": []})["ops"].append(
                {"stats": stats, "timestamp": (start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")})
    return out


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_host_counters_are_their_frontends_sums_over_the_minutes_from_the_first_answers_newest(data):
    """Nodes on three hosts, some FRONTEND, some not; each node's minutes fixed, some never there (``no_zeroes``);
    answers of five-minute windows as in the cluster's property test. After each answer every host's counter is the
    sum, over its FRONTEND nodes and the minutes from the first non-empty answer's newest (any node's) to the newest
    window end so far, of rate × 60 (latency: × its own mean × 1e-6), absent where no such term exists; none
    decreased."""
    n_nodes = data.draw(st.integers(1, 6), label="nodes")
    hosts = [data.draw(st.sampled_from(["h0", "h1", "h2"]), label="host") for _ in range(n_nodes)]
    front = [data.draw(st.booleans(), label="frontend") for _ in range(n_nodes)]
    ends = answer_ends(data)
    present = {(k, i): data.draw(minute, label="minute") for k in range(n_nodes) for i in range(max(ends) + 1)
               if data.draw(st.booleans(), label="there")}
    frontend = {f"NodeId<{k}>": hosts[k] for k in range(n_nodes) if front[k]}
    counts, before, first = weka.HostCounts(), {}, None
    for k, end in enumerate(ends):
        window = range(max(0, end - 4), end + 1)
        # as the reader reads it: minutes every host has counted without their values (HostCounts.floor)
        counts.add(weka.parse_node_stats(per_node_answer(present, window), counts.floor()), frontend)
        in_window = [i for (_, i) in present if i in window]
        if first is None and in_window:
            first = max(in_window)
        got = host_counted(counts)
        seen = range(first, max(ends[: k + 1]) + 1) if first is not None else range(0)
        for h in ("h0", "h1", "h2"):
            for metric, op, rate, latency in COUNTERS:
                key = (metric.name, (*host(h), op) if op else host(h))
                terms = [t for (node, i), s in present.items() if i in seen and front[node] and hosts[node] == h
                         and (t := term(s, rate, latency)) is not None]
                assert_counter(got, before, key, terms, rel=1e-9)
        before = got


# ---- per file system (per_filesystem: true): stats_show of category fs_stats, one call per stat --------------------

FS_STATS = json.loads((DIR / "stats-show-fs-stats.json").read_text())   # stat -> answer; 15:22 .. 15:23 (+ 15:24)
FS_NAMES = {"0": "default", "1": "checkpoints"}                          # filesystems-get-capacity.json


def fs(name: str) -> tuple[str, str, str]:
    return ("w", "filesystem", name)


# the first answers: the newest minute they all hold (15:23; 15:24 is in WRITE_LATENCY's alone), per file system;
# FSId<7> is in no capacity answer: skipped
FS_FIRST = {
    (m.READ_BYTES.name, fs("default")): 2_000_000 * 60,                   # 120_000_000
    (m.WRITE_BYTES.name, fs("default")): 0,
    (m.OPERATIONS.name, (*fs("default"), "read")): 200 * 60,              # 12_000
    (m.OPERATIONS.name, (*fs("default"), "write")): 0,
    (m.LATENCY.name, (*fs("default"), "read")): pytest.approx(1.8),       # 150 µs × 12_000; its write latency null
    (m.READ_BYTES.name, fs("checkpoints")): 0,
    (m.WRITE_BYTES.name, fs("checkpoints")): 6_000_000 * 60,              # 360_000_000
    (m.OPERATIONS.name, (*fs("checkpoints"), "read")): 0,
    (m.OPERATIONS.name, (*fs("checkpoints"), "write")): 60 * 60,          # 3_600
    (m.LATENCY.name, (*fs("checkpoints"), "write")): pytest.approx(9.0),  # 2500 µs × 3_600; its read latency null
}


def fs_answers(minutes: dict[int, dict[str, dict[str, float]]], stats=weka.STATS) -> dict[str, dict]:
    """The six fs_stats answers with one item per minute after 2021-08-16T15:00:00Z: minute -> stat -> id -> value."""
    start = datetime(2021, 8, 16, 15, 0, tzinfo=timezone.utc)
    return {stat: {"all": {"fs_stats": [
        {"stats": {f"{stat}[fS: {fs_id}]": v for fs_id, v in per_stat.get(stat, {}).items()},
         "timestamp": (start + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        for i, per_stat in minutes.items()]}} for stat in stats}


def fs_counted(counts: weka.HostCounts) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in counts.samples("w", {}, weka.FILESYSTEM_SCOPE)}


def test_the_per_filesystem_request_is_one_stat_of_category_fs_stats_for_every_file_system():
    assert weka.fs_stats_params("READ_BYTES") == {"category": "fs_stats", "stat": "READ_BYTES", "interval": "5m",
                                                  "param": {"fS": "*"}}


def test_file_systems_are_named_by_the_id_in_their_capacity_key():
    assert weka.filesystem_names(CAPACITY) == FS_NAMES
    assert weka.filesystem_names({"FSId<4>": {"name": "a"}, "FSId<5>": {"name": ""}, "FS<6>": {"name": "b"},
                                  "FSId<7>": 3}) == {"4": "a"}
    with pytest.raises(AnswerError):
        weka.filesystem_names([])


def test_the_first_per_filesystem_answers_count_the_newest_minute_they_all_hold():
    counts = weka.HostCounts()
    counts.add(weka.parse_fs_stats(FS_STATS), FS_NAMES)
    assert fs_counted(counts) == FS_FIRST


def test_a_minute_one_answer_held_early_is_counted_once_every_answer_holds_it():
    counts = weka.HostCounts()
    counts.add(weka.parse_fs_stats(FS_STATS), FS_NAMES)
    # the next poll: 15:23 again, and 15:24 in every answer now (WRITE_LATENCY's 15:24 value has changed since)
    later = fs_answers({23: {}, 24: {"WRITES": {"1": 10}, "WRITE_BYTES": {"1": 1_000_000}, "WRITE_LATENCY": {"1": 100},
                                     "READS": {"0": 5}}})
    counts.add(weka.parse_fs_stats(later, counts.floor()), FS_NAMES)
    got = fs_counted(counts)
    assert got[(m.WRITE_BYTES.name, fs("checkpoints"))] == 360_000_000 + 60_000_000
    assert got[(m.OPERATIONS.name, (*fs("checkpoints"), "write"))] == 3_600 + 600
    assert got[(m.LATENCY.name, (*fs("checkpoints"), "write"))] == pytest.approx(9.0 + 0.06)   # 100 µs × 600
    assert got[(m.OPERATIONS.name, (*fs("default"), "read"))] == 12_000 + 300
    counts.add(weka.parse_fs_stats(later, counts.floor()), FS_NAMES)   # the same answers again: nothing newer
    assert fs_counted(counts) == got


def test_a_file_system_no_longer_listed_is_forgotten_and_counts_anew_if_it_returns():
    counts = weka.HostCounts()
    counts.add(weka.parse_fs_stats(FS_STATS), FS_NAMES)
    counts.keep({"checkpoints"})
    assert {labels[2] for _, labels in fs_counted(counts)} == {"checkpoints"}
    # back in a later answer: its minutes after the newest already seen (15:23), from zero
    counts.add(weka.parse_fs_stats(fs_answers({24: {"READS": {"0": 7}}}), counts.floor()), FS_NAMES)
    assert fs_counted(counts)[(m.OPERATIONS.name, (*fs("default"), "read"))] == 7 * 60


def test_keys_of_another_stat_or_form_are_skipped_and_a_stat_without_fs_stats_counts_nothing():
    answers = fs_answers({1: {"READS": {"2": 10}}})
    answers["READS"]["all"]["fs_stats"][0]["stats"].update({"WRITES[fS: 2]": 99, "READS[fs: 3]": 99, "READS": 99,
                                                            "READS[fS:4]": 20})
    answers["WRITES"] = {"all": {}}
    parsed = weka.parse_fs_stats(answers)
    assert {fs_id: [b.stats for b in buckets] for fs_id, buckets in parsed.items()} == {
        "2": [{"READS": 10}], "4": [{"READS": 20}]}


@pytest.mark.parametrize("result", [[], {"all": 3}, {"all": {"fs_stats": {}}}, {"all": {"fs_stats": [3]}},
                                    {"all": {"fs_stats": [{"stats": {}, "timestamp": "now"}]}}])
def test_a_result_that_is_not_an_fs_stats_answer_is_refused(result):
    with pytest.raises(AnswerError):
        weka.parse_fs_stats({"READS": result})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=14), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(weka.STATS), JSON, max_size=6))
def test_any_json_per_stat_is_read_or_refused_with_an_answer_error(results):
    try:
        parsed = weka.parse_fs_stats(results)
    except AnswerError:
        return
    for buckets in parsed.values():
        assert all(set(b.stats) <= set(weka.STATS) and all(v >= 0 for v in b.stats.values()) for b in buckets)
