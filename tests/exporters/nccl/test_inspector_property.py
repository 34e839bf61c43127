"""Property-based tests (hypothesis) of the NCCL Inspector file parser: any bytes raise nothing but
``InspectorFileError``; buckets written in either NCCL layout come back as written; what it accepts,
prometheus_client's own parser reads to the same samples; and a file cut inside a bucket is never accepted. Examples
are few so ``make test`` stays fast."""
from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.nccl import inspector as fmt
from lockstep.simulator.inspector import g6, size_human, size_range
from tests.helpers.paths import FIXTURES

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
README_2_30 = (FIXTURES / "nccl-inspector/readme-v2.30.7-example.prom").read_bytes()

# Label values NCCL prints with %s and never escapes: names without quotes, backslashes or line ends.
NAME = st.text(string.ascii_letters + string.digits + " _-:./", min_size=1, max_size=20)
NUMBER = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False)
COLLECTIVES = st.sampled_from(["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllGatherV"])


@st.composite
def bucket_2_30(draw) -> tuple[str, dict[str, str], dict[str, float]]:
    p2p = draw(st.booleans())
    size = draw(st.integers(0, 2**42))
    labels = {"version": "v5.1", "slurm_job_id": draw(st.sampled_from(["unknown", "4242"])), "node": draw(NAME),
              "gpu": f"GPU{draw(st.integers(0, 7))}", "comm_name": draw(NAME), "n_nodes": str(draw(st.integers(1, 64))),
              "nranks": str(draw(st.integers(1, 512)))}
    if p2p:
        labels |= {"p2p_operation": draw(st.sampled_from(["Send", "Recv"])), "message_size": size_range(size)}
        names = ("nccl_p2p_bus_bandwidth_gbs", "nccl_p2p_exec_time_microseconds")
    else:
        labels |= {"collective": draw(COLLECTIVES), "message_size": size_range(size),
                   "algo_proto": draw(st.sampled_from(["RING_SIMPLE", "NVLS_SIMPLE", "TREE_LL128", "unknown"]))}
        names = ("nccl_bus_bandwidth_gbs", "nccl_collective_exec_time_microseconds")
    return "p2p" if p2p else "collective", labels, {n: float(g6(draw(NUMBER))) for n in names}


@st.composite
def bucket_2_29(draw) -> tuple[str, dict[str, str], dict[str, float]]:
    labels = {"comm_id": hex(draw(st.integers(1, 2**63))), "hostname": draw(NAME), "rank": str(draw(st.integers(0, 511))),
              "slurm_job": draw(NAME), "slurm_job_id": "unknown", "nranks": str(draw(st.integers(1, 512))),
              "n_nodes": str(draw(st.integers(1, 64))), "gpu_device_id": f"GPU{draw(st.integers(0, 7))}",
              "collective": draw(COLLECTIVES), "coll_sn": str(draw(st.integers(0, 2**40))),
              "timestamp": "2025-10-17T03:31:47Z", "message_size": size_human(draw(st.integers(0, 2**42)))}
    names = ("nccl_algorithm_bandwidth_gbs", "nccl_bus_bandwidth_gbs", "nccl_collective_exec_time_microseconds")
    return "collective", labels, {n: float(g6(draw(NUMBER))) for n in names}


def render(buckets) -> bytes:
    out = []
    for _, labels, values in buckets:
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        out += [f"{name}{{{text}}} {g6(value)}\n" for name, value in values.items()]
    return "".join(out).encode()


def unique(buckets):
    seen, out = set(), []
    for b in buckets:
        key = tuple(sorted((k, v) for k, v in b[1].items() if k not in fmt.CHURN))
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


FILES = st.one_of(st.lists(bucket_2_30(), max_size=8), st.lists(bucket_2_29(), max_size=6)).map(unique)


@FAST
@given(st.binary(max_size=600) | st.builds(lambda a, b: a + b, st.just(README_2_30), st.binary(max_size=80)))
def test_any_bytes_raise_nothing_but_its_own_error(data):
    try:
        fmt.parse(data)
    except fmt.InspectorFileError as exc:
        assert exc.reason in ("truncated", "malformed")


@FAST
@given(FILES)
def test_buckets_come_back_as_written(buckets):
    parsed = fmt.parse(render(buckets))
    assert len(parsed) == len(buckets)
    for bucket, (kind, labels, values) in zip(parsed, buckets):
        assert bucket.kind == kind
        assert dict(bucket.labels) == {k: v for k, v in labels.items() if k not in fmt.CHURN}
        assert dict(bucket.values) == values


@FAST
@given(FILES)
def test_what_it_accepts_prometheus_client_reads_alike(buckets):
    data = render(buckets)
    ours = {(name, tuple(sorted(b.labels)), value) for b in fmt.parse(data) for name, value in b.values}
    theirs = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in fmt.CHURN)), s.value)
              for family in text_string_to_metric_families(data.decode()) for s in family.samples}
    assert ours == theirs


@FAST
@given(FILES.filter(bool), st.data())
def test_a_cut_inside_a_bucket_is_never_accepted(buckets, data):
    whole = render(buckets)
    per_bucket = len(buckets[0][2])
    lines = whole.split(b"\n")[:-1]
    cut = data.draw(st.integers(1, len(whole) - 1))
    prefix = whole[:cut]
    complete_lines = prefix.count(b"\n")
    at_boundary = prefix.endswith(b"\n") and complete_lines % per_bucket == 0
    try:
        parsed = fmt.parse(prefix)
    except fmt.InspectorFileError as exc:
        assert not at_boundary and exc.reason == "truncated"
    else:
        assert at_boundary and len(parsed) == complete_lines // per_bucket <= len(lines)


def _outcome(data: bytes, memo: dict | None = None):
    try:
        return fmt.parse(data, memo)
    except fmt.InspectorFileError as exc:
        return exc.reason, str(exc)


@FAST
@given(FILES, st.lists(st.floats(min_value=1e-3, max_value=1e7, allow_nan=False), min_size=1, max_size=64),
       st.binary(max_size=120), st.data())
def test_a_rewrite_read_with_the_last_reads_lines_comes_out_as_read_afresh(buckets, values, noise, data):
    """The collector keeps each file's lines from its last read (``memo``) and reads only the values of a line it
    knows: whatever the rewrite (new values, buckets gone or added, a cut, bytes that are no file), the outcome is
    the fresh read's, the same buckets or the same error."""
    first = render(buckets)
    rewritten = [(kind, labels, {n: float(g6(values[(i + j) % len(values)])) for j, n in enumerate(v)})
                 for i, (kind, labels, v) in enumerate(buckets)]
    second = render(data.draw(st.permutations(rewritten)) if rewritten else rewritten)
    cut = data.draw(st.integers(0, len(second)))
    for after in (second, second[:cut], first + noise, noise + first):
        memo: dict = {}
        _outcome(first, memo)
        assert _outcome(after, memo) == _outcome(after)
        assert _outcome(first, memo) == _outcome(first)      # and the memo it left reads the first file alike


def test_a_known_lines_value_is_still_checked():
    memo: dict = {}
    fmt.parse(README_2_30, memo)
    line = README_2_30.split(b"\n")[0]
    for bad in (b"NaN", b"+Inf", b"1e999", b"12abc", b""):
        with pytest.raises(fmt.InspectorFileError, match="line 1"):
            fmt.parse(line.rsplit(b" ", 1)[0] + b" " + bad + b"\n" + README_2_30.split(b"\n", 1)[1], memo)
