"""Property tests (hypothesis) of ``lockstep analytics hang``: on any bytes the dump reader raises nothing but
``DumpError``; on any simulated job (world size, tensor-parallel groups, which rank stops before which
collective, ring buffer size, format) the matcher names the rank that stopped, and only it, as the
scenario says (the scenario's parameters are the truth, never the matcher's output); with nobody
stopping it finds nothing; JSON and pickle dumps of one job give one answer."""
from __future__ import annotations

import json
import pickle
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.analytics.hang import dump, match, report
from lockstep.simulator.flightrecorder import Mismatch, write_dumps
from tests.helpers.paths import FIXTURES

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REAL = [p.read_bytes() for p in sorted((FIXTURES / "flightrecorder" / "torch-2.13.0-gloo").glob("*/*"))]


def _read(data: bytes) -> None:
    fmt, doc = dump.decode_bytes(data)
    dump.parse(doc, 0, "f", fmt)


@FAST
@given(st.sampled_from(REAL), st.integers(0, 5000), st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 255)),
                                                              max_size=6))
def test_cut_or_corrupted_real_dumps_raise_only_dump_error(data, cut, flips):
    raw = bytearray(data[:cut] if cut < len(data) else data)
    for at, value in flips:
        if raw:
            raw[at % len(raw)] = value
    try:
        _read(bytes(raw))
    except dump.DumpError:
        pass


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=4), max_leaves=20)
KEYS = ("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
        "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state", "retired", "is_p2p",
        "time_created_ns", "timeout_ms", "duration_ms", "time_discovered_started_ns", "time_discovered_completed_ns")


@FAST
@given(st.sampled_from([d for d in REAL if d[:1] == b"\x80"]), st.sampled_from(KEYS), JSONISH,
       st.sampled_from(["pg_config", "pg_status", "version", "entries"]), JSONISH, st.booleans())
def test_any_value_in_any_field_raises_only_dump_error(data, key, value, top, top_value, as_pickle):
    doc = pickle.loads(data)
    doc["entries"][0][key] = value
    if as_pickle:
        doc[top] = top_value
    encoded = pickle.dumps(doc, protocol=2) if as_pickle else json.dumps(doc, default=list).encode()
    try:
        _read(encoded)
    except dump.DumpError:
        pass


def _job(world: int, tp: int, stop, fmt: str, steps: int, buffer_size: int, mismatch=None):
    """Write the job's dumps, read them back, match them."""
    tp_groups = [list(range(i, i + tp)) for i in range(0, world, tp)] if tp > 1 else []
    kwargs = dict(stop_rank=stop[0], at_seq=stop[1], stop_pg=stop[2]) if stop else {}
    with tempfile.TemporaryDirectory(prefix="hang-property-") as directory:
        write_dumps(directory, world, {"tp": tp_groups} if tp_groups else {}, fmt=fmt, steps=steps,
                    buffer_size=buffer_size, mismatch=mismatch, **kwargs)
        read = dump.read_dir(directory)
    assert read.unreadable == []
    return read, match.analyse(read.dumps)


@st.composite
def jobs(draw):
    world = draw(st.integers(2, 12))
    tp = draw(st.sampled_from([d for d in range(1, world + 1) if world % d == 0]))
    steps = draw(st.integers(2, 6))
    stop = None
    if draw(st.booleans()):
        desc = draw(st.sampled_from(["default_pg", "tp"] if tp > 1 else ["default_pg"]))
        stop = (draw(st.integers(0, world - 1)), draw(st.integers(1, steps)), desc)
    return world, tp, stop, draw(st.sampled_from(["json", "pickle"])), steps, draw(st.integers(1, 40))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_the_rank_that_stopped_is_named(job):
    world, tp, stop, fmt, steps, buffer_size = job
    read, a = _job(*job)
    if stop is None:
        assert a.findings == () and a.suspects == ()
        return
    rank, seq, desc = stop
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.seq, first.missing) == ("missing", desc, seq, (rank,))
    expected_members = tuple(range(world)) if desc == "default_pg" else \
        tuple(range(rank - rank % tp, rank - rank % tp + tp))
    assert first.members == expected_members
    assert set(first.joined) == set(expected_members) - {rank}
    assert a.suspects == (rank,)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_json_and_pickle_give_one_answer(job):
    world, tp, stop, _, steps, buffer_size = job
    docs = []
    for fmt in ("json", "pickle"):
        read, a = _job(world, tp, stop, fmt, steps, buffer_size)
        doc = report.document(a, read, "", {})
        del doc["dumps"]
        docs.append(doc)
    assert docs[0] == docs[1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 12), st.integers(2, 5), st.data())
def test_the_rank_that_calls_differently_is_named(world, steps, data):
    rank = data.draw(st.integers(0, world - 1))
    seq = data.draw(st.integers(1, steps))
    change = data.draw(st.sampled_from([dict(shape=(7, 3)), dict(dtype="Float"), dict(op="broadcast")]))
    _, a = _job(world, 1, None, data.draw(st.sampled_from(["json", "pickle"])), steps, 2000,
                   Mismatch(rank, seq, **change))
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.seq) == ("mismatch", "default_pg", seq)
    odd = [ranks for d in first.differences for _, ranks in d.values[1:]]
    assert odd and all(ranks == (rank,) for ranks in odd)


def test_the_real_dumps_are_there():
    assert len(REAL) == 6
