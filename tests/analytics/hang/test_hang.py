"""``lockstep analytics hang``: Flight Recorder dumps → the collective not every rank joined, and who.

The expected answers never come from the code under test: for the real dumps torch 2.13 wrote, from
how ``tests/fixtures/flightrecorder/make_gloo_dumps.py`` made the hang (its README); for the
simulated ones, from the scenario's own parameters (which rank stops, before which collective, which
rank calls with another shape).
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockstep.analytics.hang import dump, match, placement, report
from lockstep.simulator.flightrecorder import Group, Mismatch, write_dumps
from tests.helpers.paths import FIXTURES, REPO

GLOO = FIXTURES / "flightrecorder" / "torch-2.13.0-gloo"
SIMULATED = FIXTURES / "flightrecorder" / "simulated-pipeline"
PIPELINE = [Group("tp", (0, 1)), Group("tp", (2, 3)), Group("pp", (0, 1, 2, 3), op="send")]
FORMATS = ("json", "pickle")


def analyse(directory, **kwargs):
    read = dump.read_dir(str(directory), kwargs.pop("prefix", None))
    return read, match.analyse(read.dumps, [u.rank for u in read.unreadable], **kwargs)


def cli(*args: str) -> subprocess.CompletedProcess:
    """The real command, as an on-call engineer runs it."""
    return subprocess.run([sys.executable, "-m", "lockstep", "analytics", "hang", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


# --- real dumps written by torch ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_real_torch_dumps_name_the_rank_that_stopped(fmt):
    """make_gloo_dumps.py: rank 2 never calls the default group's all-reduce #4; ranks 0 and 1 time out in it."""
    read, a = analyse(GLOO / fmt)
    assert read.unreadable == [] and sorted(read.dumps) == [0, 1, 2]
    assert {d.fmt for d in read.dumps.values()} == {fmt} and a.versions == ("2.10",)
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.seq, first.op) == ("missing", "default_pg", 4, "gloo:all_reduce")
    assert first.missing == (2,) and first.joined == (0, 1)
    assert first.input_sizes == ((1024, 8),) and first.dtypes == ("Float",)
    assert a.suspects == (2,)
    assert len(a.findings) == 1            # the "tp" group (ranks 0 and 1) did all its all-reduces
    rank2 = next(s for s in first.ranks if s.rank == 2)
    assert (rank2.joined, rank2.last_enqueued, rank2.waiting_in) == (False, 3, None)


def test_real_torch_dumps_pickle_and_json_agree():
    docs = [report.document(*_analysed(GLOO / fmt), str(GLOO / fmt), {}) for fmt in FORMATS]
    for d in docs:
        del d["dumps"]
    assert docs[0] == docs[1]


def _analysed(directory):
    read, a = analyse(directory)
    return a, read


def test_real_torch_pickle_has_no_globals_and_the_generator_writes_its_keys(tmp_path):
    """The format facts the reader and the simulator rely on, checked on what torch really wrote."""
    real = pickle.loads((GLOO / "pickle" / "nccl_trace_rank_0").read_bytes())
    real_json = json.loads((GLOO / "json" / "nccl_trace_rank_0").read_text())
    data = (GLOO / "pickle" / "nccl_trace_rank_0").read_bytes()
    assert data[:2] == b"\x80\x02"                                  # protocol 2
    assert dump.unpickle(data) == real                              # loads with every global refused
    assert isinstance(real["entries"][0]["process_group"], tuple)  # a tuple in the pickle ...
    assert isinstance(real_json["entries"][0]["process_group"], list)   # ... a list in JSON
    assert real["entries"][0]["time_discovered_completed_ns"] is None
    assert real_json["entries"][0]["time_discovered_completed_ns"] == 0
    assert isinstance(real["pg_status"]["0"]["last_enqueued_collective"], int)
    assert isinstance(real_json["pg_status"]["0"]["last_enqueued_collective"], str)
    assert list(real_json) == sorted(real_json)                     # the JSON writer sorts keys

    for fmt in FORMATS:
        write_dumps(tmp_path / fmt, 3, {"tp": [[0, 1]]}, fmt=fmt, steps=2)
    gen = {"pickle": pickle.loads((tmp_path / "pickle" / "nccl_trace_rank_0").read_bytes()),
           "json": json.loads((tmp_path / "json" / "nccl_trace_rank_0").read_text())}
    assert set(gen["pickle"]) == set(real) and set(gen["json"]) == set(real_json)
    real_keys = set(real["entries"][0]) | {"frames"}                # torch leaves frames out when asked to
    assert set(gen["pickle"]["entries"][0]) == real_keys
    assert set(gen["json"]["entries"][0]) == set(real_json["entries"][0])
    for key, value in real["entries"][0].items():
        assert type(gen["pickle"]["entries"][0][key]) is type(value) or value is None, key
    for key, value in real_json["entries"][0].items():
        assert type(gen["json"]["entries"][0][key]) is type(value), key
    assert set(gen["pickle"]["pg_status"]["0"]) == set(real["pg_status"]["0"])


# --- simulated jobs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_committed_simulated_dumps_are_what_the_generator_writes(tmp_path, fmt):
    write_dumps(tmp_path, 4, PIPELINE, stop_rank=2, at_seq=3, stop_pg="tp", steps=4, fmt=fmt)
    for rank in range(4):
        name = f"nccl_trace_rank_{rank}"
        assert (tmp_path / name).read_bytes() == (SIMULATED / fmt / name).read_bytes(), name
    _, a = analyse(SIMULATED / fmt)
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.members, first.seq, first.missing) == ("missing", "tp", (2, 3), 3, (2,))
    assert a.suspects == (2,)
    assert any(f.seq_kind == "p2p" and f.peer == (1, 2) and f.missing == (2,) for f in a.findings)


TP16 = {"tp": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]],
        "dp": [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_rank_in_a_job_with_several_process_groups(tmp_path, fmt):
    """16 ranks, tensor-parallel groups of 4 and data-parallel groups across them; rank 6 stops before
    the 3rd collective of its tensor-parallel group."""
    write_dumps(tmp_path, 16, TP16, stop_rank=6, at_seq=3, stop_pg="tp", fmt=fmt)
    _, a = analyse(tmp_path)
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.members, first.seq) == ("missing", "tp", (4, 5, 6, 7), 3)
    assert first.missing == (6,) and first.joined == (4, 5, 7)
    assert a.suspects == (6,)
    # The ranks that wait on rank 6 miss later collectives too, but wait in something themselves.
    later_missing = {r for f in a.findings[1:] for r in f.missing}
    assert 6 in later_missing or later_missing
    for f in a.findings[1:]:
        for s in f.ranks:
            if s.joined is False and s.rank != 6:
                assert s.waiting_in is not None
    # The tensor-parallel groups rank 6 is not in completed collective 3.
    assert not any(f.pg_desc == "tp" and 6 not in f.members for f in a.findings)


def test_groups_sharing_a_name_are_kept_apart(tmp_path):
    """split_group gives disjoint groups one name: a rank of one must not look missing from the other."""
    groups = [Group("tp", (0, 1), name="5"), Group("tp", (2, 3), name="5")]
    write_dumps(tmp_path, 4, groups, stop_rank=3, at_seq=2, stop_pg="tp")
    _, a = analyse(tmp_path)
    first = a.findings[0]
    assert (first.pg_name, first.members, first.seq, first.missing, first.joined) == ("5", (2, 3), 2, (3,), (2,))
    assert not any(f.pg_name == "5" and f.members == (0, 1) for f in a.findings)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_hang(tmp_path, fmt):
    write_dumps(tmp_path, 8, TP16 | {"tp": [[0, 1, 2, 3], [4, 5, 6, 7]], "dp": [[0, 4], [1, 5], [2, 6], [3, 7]]},
                fmt=fmt)
    _, a = analyse(tmp_path)
    assert a.findings == () and not a.hang and a.suspects == ()
    assert {g.desc for g in a.groups} == {"default_pg", "tp", "dp"}


@pytest.mark.parametrize("change,field", [
    (dict(shape=(4096, 512)), "input_sizes"),
    (dict(dtype="Float"), "dtypes"),
    (dict(op="all_gather"), "op"),
])
def test_mismatched_collective(tmp_path, change, field):
    """Rank 9 calls the 2nd all-reduce of its tensor-parallel group with another shape, dtype or operation."""
    write_dumps(tmp_path, 16, TP16, mismatch=Mismatch(9, 2, desc="tp", **change))
    _, a = analyse(tmp_path)
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.members, first.seq) == ("mismatch", "tp", (8, 9, 10, 11), 2)
    fields = {d.field: d for d in first.differences}
    assert field in fields
    majority, odd = fields[field].values
    assert odd[1] == (9,) and majority[1] == (8, 10, 11)
    assert "rank 9" in report.summary(a, {})


def test_point_to_point_peer_that_never_posts_its_receive(tmp_path):
    """A pipeline 0 → 1 → 2 → 3; rank 2 stops in its tensor-parallel group, so rank 1's send to it waits."""
    write_dumps(tmp_path, 4, PIPELINE, stop_rank=2, at_seq=3, stop_pg="tp")
    _, a = analyse(tmp_path)
    p2p = [f for f in a.findings if f.seq_kind == "p2p"]
    assert len(p2p) == 1
    f = p2p[0]
    assert (f.kind, f.pg_desc, f.peer, f.missing, f.joined) == ("missing", "pp", (1, 2), (2,), (1,))
    assert f.op == "nccl:send 1->2"
    assert a.suspects == (2,)


def test_p2p_size_mismatch(tmp_path):
    write_dumps(tmp_path, 2, [Group("pp", (0, 1), op="send")])
    path = tmp_path / "nccl_trace_rank_1"
    doc = json.loads(path.read_text())
    recvs = [e for e in doc["entries"] if "recv" in e["profiling_name"]]
    recvs[2]["output_sizes"] = [[4096, 1000]]
    path.write_text(json.dumps(doc))
    _, a = analyse(tmp_path)
    (f,) = [f for f in a.findings if f.kind == "mismatch"]
    assert (f.seq_kind, f.peer, f.seq) == ("p2p", (0, 1), recvs[2]["p2p_seq_id"])
    assert [d.field for d in f.differences] == ["sizes"]


def test_rank_without_a_dump_is_the_suspect(tmp_path):
    """Rank 1 died before the 3rd all-reduce of its group: no file from it."""
    write_dumps(tmp_path, 4, {"tp": [[0, 1], [2, 3]]}, stop_rank=1, at_seq=3, stop_pg="tp", no_dump=[1])
    _, a = analyse(tmp_path)
    first = a.findings[0]
    assert (first.kind, first.pg_desc, first.seq, first.no_dump, first.joined) == ("no_dump", "tp", 3, (1,), (0,))
    assert a.suspects == (1,) and a.no_dump == (1,)


def test_wrapped_ring_buffer(tmp_path):
    """Each rank keeps its last 5 entries only: collectives before them are not held against anyone."""
    write_dumps(tmp_path, 8, {"tp": [[0, 1, 2, 3], [4, 5, 6, 7]]}, stop_rank=5, at_seq=9, steps=12, buffer_size=5)
    read, a = analyse(tmp_path)
    assert all(d.wrapped for d in read.dumps.values())
    first = a.findings[0]
    assert (first.pg_desc, first.seq, first.missing) == ("default_pg", 9, (5,))
    assert a.suspects == (5,)


def test_a_wrapped_buffer_that_lost_a_whole_group_is_not_blamed(tmp_path):
    """Rank 1's ring buffer has overwritten every entry of group "init" (as for a group used only early on)
    and holds no status for it; rank 0's buffer still holds them. Rank 1 did join them; nothing in its dump
    says otherwise, so it is not reported."""
    write_dumps(tmp_path, 2, [Group("init", (0, 1))], steps=4)
    path = tmp_path / "nccl_trace_rank_1"
    doc = json.loads(path.read_text())
    doc["entries"] = doc["entries"][-1:]     # its last all-reduce of the default group, after the last "init" one
    init_id = next(k for k, cfg in doc["pg_config"].items() if cfg["desc"] == "init")
    doc["pg_status"] = {k: v for k, v in doc["pg_status"].items() if k != "1"}
    assert init_id == "1" and doc["entries"][0]["record_id"] > 0
    path.write_text(json.dumps(doc))
    read, a = analyse(tmp_path)
    assert read.dumps[1].wrapped and not read.dumps[0].wrapped
    assert a.findings == ()


def test_stalled_with_every_rank_in_it(tmp_path):
    """Every rank joined the last all-reduce and none saw it complete: the collective itself is stuck."""
    write_dumps(tmp_path, 4, {}, steps=3)
    for rank in range(4):
        path = tmp_path / f"nccl_trace_rank_{rank}"
        doc = json.loads(path.read_text())
        doc["entries"][-1].update(state="scheduled", retired=False, time_discovered_completed_ns=0)
        path.write_text(json.dumps(doc))
    _, a = analyse(tmp_path)
    (f,) = a.findings
    assert (f.kind, f.seq, f.joined, f.missing) == ("stalled", 3, (0, 1, 2, 3), ())
    assert a.suspects == ()


# --- untrusted input -------------------------------------------------------------------------------------

class _Payload:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _hostile(kind: str, target: Path) -> bytes:
    if kind == "os.system":
        inner = _Payload(os.system, f"touch {target}")
    elif kind == "open":
        inner = _Payload(open, str(target), "w")
    else:   # a class object in an otherwise plain dump
        inner = pickle.PicklingError
    doc = {"version": "2.10", "pg_config": {}, "pg_status": {},
           "entries": [{"record_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": 1,
                        "profiling_name": "nccl:all_reduce", "frames": [{"name": inner}]}]}
    return pickle.dumps(doc, protocol=2)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["os.system", "open", "class"])
def test_hostile_pickle_is_refused_without_running(tmp_path, kind):
    if kind != "class":  # the payload is live: plain pickle.loads does create the file
        control = tmp_path / "control"
        pickle.loads(_hostile(kind, control))
        assert control.exists()
    target = tmp_path / "pwned"
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "nccl_trace_rank_0").write_bytes(_hostile(kind, target))
    write_dumps(tmp_path / "good", 2, {}, fmt="pickle")
    shutil.copy(tmp_path / "good" / "nccl_trace_rank_1", tmp_path / "dumps")
    with pytest.raises(dump.DumpError, match="refused global"):
        dump.unpickle(_hostile(kind, target))
    result = cli(tmp_path / "dumps")
    assert not target.exists()
    assert "refused global" in result.stdout and result.returncode in (0, 1)
    read, _ = analyse(tmp_path / "dumps")
    assert [u.rank for u in read.unreadable] == [0] and sorted(read.dumps) == [1]
    assert not target.exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_dump_loses_that_rank_only(tmp_path, fmt):
    write_dumps(tmp_path, 8, {"tp": [[0, 1, 2, 3], [4, 5, 6, 7]]}, stop_rank=5, at_seq=4, fmt=fmt)
    path = tmp_path / "nccl_trace_rank_2"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    read, a = analyse(tmp_path)
    (u,) = read.unreadable
    assert (u.rank, u.file) == (2, "nccl_trace_rank_2") and ("truncated" in u.reason)
    assert a.findings[0].missing == (5,) and a.suspects == (5,)
    assert 2 in a.no_dump


def test_bounds_on_json_and_file_size(tmp_path):
    with pytest.raises(dump.DumpError, match="nested too deeply"):
        dump.decode_bytes(b'{"a":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"{" + b" " * 5000 + b"}")
    with pytest.raises(dump.DumpError, match="over the cap"):
        dump.read_file(str(tmp_path / "nccl_trace_rank_0"), max_bytes=1000)
    os.mkfifo(tmp_path / "nccl_trace_rank_1")      # never opened for a blocking read
    with pytest.raises(dump.DumpError, match="not a regular file"):
        dump.read_file(str(tmp_path / "nccl_trace_rank_1"))


@pytest.mark.parametrize("doc,reason", [
    ({"pg_config": {}}, "no version"),
    ({"version": "2.10", "entries": [{"record_id": "7", "process_group": ["0", ""], "collective_seq_id": 1,
                                       "profiling_name": "nccl:all_reduce"}]}, "record_id"),
    ({"version": "2.10", "entries": [{"record_id": 0, "process_group": ["0"], "collective_seq_id": 1,
                                       "profiling_name": "nccl:all_reduce"}]}, "process_group"),
    ({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "", "ranks": "__import__('os')"}}}, "ranks"),
    ({"version": "2.10", "pg_status": {"0": {"last_enqueued_collective": "x"}}}, "last_enqueued"),
])
def test_malformed_fields_make_the_dump_unreadable(doc, reason):
    with pytest.raises(dump.DumpError, match=reason):
        dump.parse(doc, 0, "f", "json")


# --- the command -------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_exit_codes_through_the_real_command(tmp_path):
    write_dumps(tmp_path / "hang", 4, {"tp": [[0, 1], [2, 3]]}, stop_rank=3, at_seq=2)
    write_dumps(tmp_path / "ok", 4, {"tp": [[0, 1], [2, 3]]})
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "nccl_trace_rank_0").write_bytes(b"\x80\x02garbage")
    hang, ok = cli(tmp_path / "hang"), cli(tmp_path / "ok")
    assert hang.returncode == 1 and hang.stdout.startswith("HANG: rank 3 did not join all_reduce #2")
    assert ok.returncode == 0 and ok.stdout.startswith("no hang found")
    for bad in ("empty", "garbage", "absent"):
        result = cli(tmp_path / bad)
        assert result.returncode == 2 and "error" in result.stderr and result.stdout == ""


@pytest.mark.integration
def test_json_shape_and_placement(tmp_path):
    write_dumps(tmp_path / "d", 16, TP16, stop_rank=6, at_seq=3, stop_pg="tp")
    (tmp_path / "nodes").write_text("gpu-a17\ngpu-b03\n")
    result = cli(tmp_path / "d", "--json", "--nodes", f"@{tmp_path / 'nodes'}", "--gpus-per-node", "8")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert list(doc) == ["schema", "verdict", "summary", "dumps", "world", "no_dump", "suspects", "first", "findings",
                         "groups"]
    assert doc["verdict"] == "hang" and doc["suspects"] == [{"rank": 6, "node": "gpu-a17", "gpu": "6"}]
    first = doc["first"]
    assert set(first) == {"kind", "process_group", "seq_kind", "seq", "op", "input_sizes", "dtypes", "peer", "members",
                          "joined", "missing", "no_dump", "time_created_ns", "differences", "ranks"}
    assert (first["kind"], first["seq"], first["missing"]) == ("missing", 3, [6])
    six = next(r for r in first["ranks"] if r["rank"] == 6)
    assert six == {"rank": 6, "node": "gpu-a17", "gpu": "6", "joined": False, "state": None, "retired": None,
                   "last_enqueued": 2, "last_completed": 2, "last_op": "nccl:all_reduce", "last_state": "completed",
                   "waiting_in": None}
    assert doc["dumps"]["formats"] == {"json": 16} and doc["world"] == list(range(16))


@pytest.mark.integration
def test_ranks_file(tmp_path):
    write_dumps(tmp_path / "d", 4, {}, stop_rank=2, at_seq=2)
    (tmp_path / "ranks.csv").write_text("rank,node,gpu,pid\n0,n7,0,11\n1,n7,1,12\n2,n9,0,13\n3,n9,1,14\n")
    result = cli(tmp_path / "d", "--ranks", tmp_path / "ranks.csv")
    assert result.returncode == 1
    assert result.stdout.startswith("HANG: rank 2 (n9 gpu 0) did not join all_reduce #2")
    (tmp_path / "bad.csv").write_text("rank,node\n0,n7\n")
    bad = cli(tmp_path / "d", "--ranks", tmp_path / "bad.csv")
    assert bad.returncode == 2 and "missing gpu" in bad.stderr


def test_placement_parsers(tmp_path):
    assert placement.from_nodes(["a", "b"], 2) == {0: placement.Place("a", "0"), 1: placement.Place("a", "1"),
                                                   2: placement.Place("b", "0"), 3: placement.Place("b", "1")}
    (tmp_path / "r.csv").write_text("node,gpu,rank\nx,3,5\nx,3,5\n")
    with pytest.raises(Exception, match="given twice"):
        placement.from_csv(str(tmp_path / "r.csv"))


def test_several_files_for_one_rank_need_a_prefix(tmp_path):
    write_dumps(tmp_path, 2, {}, fmt="json")
    write_dumps(tmp_path, 2, {}, fmt="pickle", prefix="pickled_rank_")
    read, _ = analyse(tmp_path)
    assert read.dumps == {} and {u.rank for u in read.unreadable} == {0, 1}
    read, a = analyse(tmp_path, prefix="pickled_rank_")
    assert sorted(read.dumps) == [0, 1] and {d.fmt for d in read.dumps.values()} == {"pickle"} and not a.hang
