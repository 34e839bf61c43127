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
    ends = [data.draw(st.integers(4, 10), label="first end")]
    for _ in range(data.draw(st.integers(0, 8), label="answers")):
        ends.append(max(0, max(ends) + data.draw(st.integers(-6, 5), label="step")))
    minutes = data.draw(st.lists(minute, min_size=max(ends) + 1, max_size=max(ends) + 1), label="minutes")
    counts, before = weka.Counts(), {}
    for k, end in enumerate(ends):
        window = data.draw(st.permutations(range(max(0, end - 4), end + 1)), label="order")
        counts.add(weka.parse_stats(answer({i: minutes[i] for i in window})))
        got = counted(counts)
        seen = range(ends[0], max(ends[: k + 1]) + 1)
        for metric, op, rate, latency in ((m.READ_BYTES, "", "READ_BYTES", None), (m.WRITE_BYTES, "", "WRITE_BYTES", None),
                                          (m.OPERATIONS, "read", "READS", None), (m.OPERATIONS, "write", "WRITES", None),
                                          (m.LATENCY, "read", "READS", "READ_LATENCY"),
                                          (m.LATENCY, "write", "WRITES", "WRITE_LATENCY")):
            key = (metric.name, (*KEY, op) if op else KEY)
            terms = [minutes[i][rate] * 60 * (1 if latency is None else minutes[i][latency] * 1e-6) for i in seen
                     if minutes[i][rate] is not None and (latency is None or minutes[i][latency] is not None)]
            if terms:
                assert got[key] == pytest.approx(sum(terms), rel=1e-12)
            else:
                assert key not in got
            assert got.get(key, 0.0) >= before.get(key, 0.0)
        before = got
