"""NCCL RAS answers parsed: golden records of the answers in tests/fixtures/nccl-ras/ (written from NCCL's
writers, see its README), the 2.28.x missing comma, and on arbitrary input no exception but RasParseError."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.exporters.nccl.node import parse_fib_trie, parse_if_inet6, slurm_job_of_cgroup, slurm_job_of_pid
from lockstep.exporters.nccl.ras import RasParseError, normal_hash, parse, parse_json, parse_text, rank_state
from lockstep.exporters.nccl.rasclient import parse_address
from tests.helpers.paths import FIXTURES

RAS = FIXTURES / "nccl-ras"
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ANSWERS = sorted(p.name for p in RAS.glob("status-*"))


def record(path) -> str:
    """The parsed answer as reviewable JSON (a rank's counts as one object)."""
    fmt = "json" if path.suffix == ".json" else "text"
    doc = dataclasses.asdict(parse(path.read_text(), fmt))
    for comm in doc["communicators"]:
        for rank in comm["ranks"]:
            rank["counts"] = dict(rank["counts"])
    return json.dumps(doc, indent=1) + "\n"


@pytest.mark.parametrize("name", ANSWERS)
def test_golden_records(name, golden):
    golden(f"nccl-ras/{name}.record.json", record(RAS / name))


def test_the_frozen_rank_is_the_one_behind_in_both_formats():
    as_json = parse_json((RAS / "status-2.30.7.json").read_text())
    as_text = parse_text((RAS / "status-verbose-2.30.7.txt").read_text())
    world = "6af30338a8cd3f74"
    [comm] = [c for c in as_json.communicators if c.hash == world]
    allreduce = {r.rank: dict(r.counts)["AllReduce"] for r in comm.ranks}
    assert allreduce[6] == 480 and {v for r, v in allreduce.items() if r != 6} == {484}
    [comm] = [c for c in as_text.communicators if c.hash == world]
    [rank] = comm.ranks if len(comm.ranks) == 1 else [r for r in comm.ranks if r.counts]
    assert (rank.rank, rank.host, rank.nvml_dev, dict(rank.counts)) == (6, "10.10.0.12", 2, {"AllReduce": 480})


def test_both_formats_name_the_missing_rank_and_the_error():
    for status in (parse_json((RAS / "status-2.30.7.json").read_text()),
                   parse_text((RAS / "status-verbose-2.30.7.txt").read_text())):
        [world] = [c for c in status.communicators if c.hash == "6af30338a8cd3f74"]
        assert [(m.rank, m.host, m.pid, m.nvml_dev, m.unresponsive, m.dead) for m in world.missing] == \
            [(1, "10.10.0.11", 100001, 1, True, False)]
        assert (world.size, world.missing_count, world.unresponsive_count, world.async_error_count) == (8, 1, 1, 1)
        assert [r.async_error for r in world.ranks if r.rank == 3] == [6]
        assert (status.unresponsive_process_count, status.dead_process_count, status.timeouts) == (1, 0, 1)


def test_a_dead_process_marks_its_ranks_dead():
    status = parse_text((RAS / "status-dead-2.30.7.txt").read_text())
    [world] = [c for c in status.communicators if c.hash == "6af30338a8cd3f74"]
    assert [(m.rank, m.dead) for m in world.missing] == [(1, True)] and world.dead_count == 1
    assert (status.dead_process_count, status.unresponsive_process_count, status.timeouts) == (1, 0, 0)


def test_the_missing_comma_of_2_28_is_repaired():
    broken = (RAS / "status-2.28.9.json").read_text()
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken)
    fixed = parse_json(broken)
    assert dataclasses.replace(fixed, nccl_version="2.30.7") == parse_json((RAS / "status-2.30.7.json").read_text())


def test_the_writer_excerpt_shows_the_missing_comma():
    excerpt = (RAS / "client_support-v2.28.9-jsonWriteMissingRank.cc").read_text()
    assert '\\"nvml_dev\\": %d\\n"' in excerpt and '\\"status\\": {\\n"' in excerpt


def test_every_text_line_the_parser_reads_is_a_writer_format():
    """The layouts the text parser matches exist in NCCL's writers (the excerpts of v2.29.2 and v2.24.3)."""
    formats = (RAS / "client_support-v2.29.2-formats.txt").read_text() + \
        (RAS / "client_support-v2.24.3-formats.txt").read_text()
    for needle in ("  Missing communicator data from %d job process%s\\n",
                   "  %d job process%s considered dead (unreachable via the RAS network)\\n",
                   "#%d-%d (%016lx) INCOMPLETE\\n  Missing communicator data from %d rank%s\\n",
                   "  Rank %d -- GPU %s managed by process %d on node %s\\n",
                   "  Rank %d has launched up to operation %ld -- GPU %s managed by process %d on node %s\\n",
                   "  Communicator ranks have different %s operation counts\\n",
                   "  Communicator ranks have different collective operation counts\\n",
                   "  The missing rank%s: %s\\n", "  %d ranks reported %s\\n",
                   "  Asynchronous error%s on %d rank%s\\n", "  %d ranks have status %s\\n",
                   "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\\n",
                   "  \\\"collective_counts\\\": {\\n", "  \\\"considered_dead\\\": %s\\n"):
        assert needle.replace("\\\"", '\\"').strip() in formats, needle


def test_json_rank_state_follows_ras():
    assert rank_state(0, False, False, False) == "running"
    assert rank_state(7, False, False, False) == "init"
    assert rank_state(0, True, False, False) == rank_state(0, False, True, False) == "finalize"
    assert rank_state(0, True, True, True) == "abort"


@pytest.mark.parametrize("value,expected", [("0xc", "000000000000000c"), ("27a079b828ff1a75", "27a079b828ff1a75"),
                                            ("0xAE94423CFBB2EF4A", "ae94423cfbb2ef4a")])
def test_hashes_are_normalised(value, expected):
    assert normal_hash(value) == expected


@pytest.mark.parametrize("bad", ["", "0x", "0x1ffffffffffffffff", "xyz", "12 34"])
def test_bad_hashes_are_parse_errors(bad):
    with pytest.raises(RasParseError):
        normal_hash(bad)


@pytest.mark.parametrize("text", [
    "", "SERVER PROTOCOL 2\n", "ERROR: Unknown command STATUS\n",
    # Cut short: the answer ends before its warnings, or before the communicator table.
    (RAS / "status-verbose-2.30.7.txt").read_text().split("Warnings")[0],
    (RAS / "status-verbose-2.30.7.txt").read_text().split("Group     Comms")[0],
])
def test_text_that_is_no_complete_answer_is_a_parse_error(text):
    with pytest.raises(RasParseError):
        parse_text(text)


@pytest.mark.parametrize("doc", [
    "[]", "{}", '{"communicators": {}}', '{"communicators": [1]}',
    '{"communicators": [{"hash": "0x1", "size": "8", "ranks": [], "missing_ranks": []}]}',
    '{"communicators": [{"hash": "0x1", "size": 8, "ranks": [{"rank": 0}], "missing_ranks": []}]}',
    '{"communicators": [{"hash": "0x1", "size": 8, "ranks": [{"rank": 0, "host": "h", "collective_counts": '
    '{"AllReduce": -1}}], "missing_ranks": []}]}',
    "{" * 100000, "9" * 5000,
])
def test_json_that_is_no_answer_is_a_parse_error(doc):
    with pytest.raises(RasParseError):
        parse_json(doc)


def test_an_answer_of_no_communicators():
    status = parse_json('{"nccl_version": "2.30.7", "communicators_count": 0, "communicators": [\n\n  ],\n'
                        '  "ras": {"collection_time_sec": 0.001, "timeouts_count": 0}}')
    assert status.communicators == () and status.communicators_count == 0
    text = ("NCCL version 2.26.2 compiled with CUDA 12.8\n\nCommunicators... (0.001s)\n=============\n\n"
            "No communicator data collected!\n\nErrors\n======\n\nWarnings\n========\n\n")
    assert parse_text(text).communicators == ()


# What a corrupted answer could hold: its lines cut, spliced, doubled, dropped, swapped for noise.
TOKENS = st.sampled_from(["Rank", "--", "GPU", "(NVML", ")", "managed by process", "on node", "#0-0",
                          "(ffffffffffffffff)", "INCOMPLETE", "ERROR", "MISMATCH", "DEAD", "TIMEOUT", "Warnings",
                          "Errors", "9" * 30, "-1", "²", "\u0663", "ranks have status", "NOCOMM", ":", ",", "{",
                          '"nvml_dev": 1', '"status"', "\x00", "é"])
NOISE = st.lists(st.one_of(TOKENS, st.text(max_size=12)), max_size=40).map(" ".join)


def spliced(path) -> st.SearchStrategy[str]:
    lines = path.read_text().splitlines()

    def edit(choices):
        out = list(lines)
        for where, how, noise in choices:
            i = where % len(out) if out else 0
            if not out:
                out.append(noise)
            elif how == 0:
                out[i] = noise
            elif how == 1:
                out[i] = out[i][: len(out[i]) // 2]
            elif how == 2:
                out.insert(i, out[i])
            elif how == 3:
                del out[i]
            else:
                out[i] = re.sub(r"\d+", lambda _, text=noise[:8] or "x": text, out[i])
        return "\n".join(out) + "\n"

    return st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 4), NOISE), max_size=6).map(edit)


TEXTS = [RAS / n for n in ANSWERS if n.endswith(".txt")]
JSONS = [RAS / n for n in ANSWERS if n.endswith(".json")]


@FAST
@given(st.one_of(*(spliced(p) for p in TEXTS), NOISE))
def test_text_parser_raises_only_its_error(text):
    try:
        status = parse_text(text)
    except RasParseError:
        return
    assert all(len(c.hash) == 16 for c in status.communicators)


@FAST
@given(st.one_of(*(spliced(p) for p in JSONS), NOISE))
def test_json_parser_raises_only_its_error(text):
    try:
        status = parse_json(text)
    except RasParseError:
        return
    assert all(len(c.hash) == 16 for c in status.communicators)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=3), max_leaves=10)
KEYS = st.sampled_from(["hash", "size", "ranks", "missing_ranks", "rank", "host", "pid", "cuda_dev", "nvml_dev",
                        "status", "collective_counts", "init_state", "async_error", "abort_flag", "unresponsive",
                        "considered_dead", "ras", "timeouts_count", "collection_time_sec", "communicators_count"])
RANKISH = st.dictionaries(KEYS, JSON_VALUES | st.dictionaries(KEYS, JSON_VALUES, max_size=3), max_size=8)
DOCS = st.fixed_dictionaries({"communicators": st.lists(st.fixed_dictionaries(
    {"hash": st.sampled_from(["0x1", "0xfff", "zz", 3]), "size": JSON_VALUES,
     "ranks": st.lists(RANKISH, max_size=3) | JSON_VALUES,
     "missing_ranks": st.lists(RANKISH, max_size=3) | JSON_VALUES}), max_size=3)}, optional={"ras": RANKISH})


@FAST
@given(DOCS)
def test_json_of_the_right_shape_with_wrong_values_raises_only_its_error(doc):
    try:
        parse_json(json.dumps(doc))
    except RasParseError:
        pass


def rank_dicts(bad: st.SearchStrategy) -> st.SearchStrategy:
    """A rank of a JSON answer, each field of its type or (``bad``) anything else JSON holds."""
    opt_int = st.none() | st.integers(-3, 5) | bad
    flag = st.none() | st.booleans() | bad
    return st.fixed_dictionaries(
        {"rank": st.integers(0, 9) | bad, "host": st.sampled_from(["10.0.0.1", "unknown", ""]) | bad},
        optional={"pid": opt_int, "cuda_dev": opt_int, "nvml_dev": opt_int,
                  "status": st.fixed_dictionaries({}, optional={
                      "init_state": opt_int, "async_error": opt_int, "finalize_called": flag, "destroy_flag": flag,
                      "abort_flag": flag}) | bad,
                  "collective_counts": st.dictionaries(st.sampled_from(["AllReduce", "Broadcast"]),
                                                       st.integers(0, 9) | bad, max_size=2) | bad})


def _read_both(rank):
    from lockstep.exporters.nccl.ras import _json_rank, _plain_rank

    try:
        checked = _json_rank(rank, "r") if isinstance(rank, dict) else None
    except RasParseError:
        checked = None
    return _plain_rank(rank), checked


@settings(max_examples=200, deadline=None)
@given(rank_dicts(st.nothing()))
def test_a_well_formed_rank_reads_the_same_on_the_fast_path_as_field_by_field(rank):
    """The ranks of a big job's answer are read without naming each field's place (``_plain_rank``)."""
    fast, checked = _read_both(rank)
    assert fast is not None and fast == checked


@settings(max_examples=300, deadline=None)
@given(rank_dicts(st.nothing()), st.data())
def test_a_rank_with_one_field_wrong_is_left_to_the_field_by_field_check(rank, data):
    """One field of a well-formed rank replaced by any JSON value (a negative count among them): both read it
    alike, the fast path returning nothing where the check refuses."""
    places = [(rank, k) for k in ("rank", "host", "pid", "cuda_dev", "nvml_dev", "status", "collective_counts")]
    for inner in ("status", "collective_counts"):
        if isinstance(rank.get(inner), dict):
            places += [(rank[inner], k) for k in (*rank[inner], "init_state", "abort_flag")]
    where, key = data.draw(st.sampled_from(places))
    where[key] = data.draw(JSON_VALUES | st.integers(-5, -1))
    fast, checked = _read_both(rank)
    assert fast == checked


@FAST
@given(RANKISH)
def test_any_rank_shaped_object_reads_alike_on_both_paths(rank):
    fast, checked = _read_both(rank)
    assert fast == checked


FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 10.10.0.0/16 2 0 2
           |-- 10.10.0.0
              /16 link UNICAST
           |-- 10.10.0.12
              /32 host LOCAL
"""


def test_this_nodes_addresses_from_procfs():
    assert parse_fib_trie(FIB_TRIE) == {"127.0.0.1", "10.10.0.12"}
    assert parse_if_inet6("fd000000000000000000000000000021 04 40 00 80     eth0\n"
                          "00000000000000000000000000000001 01 80 10 80       lo\nbad line\n") == {"fd00::21", "::1"}


@pytest.mark.parametrize("text,job", [
    ("0::/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0\n", "1392969"),
    ("0::/system.slice/node03_slurmstepd.scope/job_77/step_batch/user/task_0\n", "77"),
    ("12:pids:/slurm/uid_2101171/job_280678/step_0/task_0\n11:devices:/slurm/uid_2101171/job_280678/step_0\n",
     "280678"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", ""),
    ("0::/kubepods.slice/kubepods-pod1.slice/job_5\n", ""),
])
def test_the_slurm_job_of_a_process(text, job):
    assert slurm_job_of_cgroup(text) == job


def test_the_slurm_job_of_a_pid_under_a_procfs_root(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242/cgroup").write_text("0::/system.slice/slurmstepd.scope/job_31/step_0/user/task_0\n")
    assert slurm_job_of_pid(tmp_path, 4242) == "31"
    assert slurm_job_of_pid(tmp_path, 4243) == "" and slurm_job_of_pid(tmp_path, -1) == ""


@pytest.mark.parametrize("value,expected", [("localhost:28028", ("localhost", 28028)),
                                            ("127.0.0.1:12345", ("127.0.0.1", 12345)),
                                            ("[::1]:28028", ("::1", 28028)), (" node3:1 ", ("node3", 1))])
def test_nccl_ras_addr_forms(value, expected):
    assert parse_address(value) == expected


@pytest.mark.parametrize("bad", ["localhost", "::1:28028", "[::1]28028", "host:0", "host:70000", ":28028", "h:x"])
def test_bad_nccl_ras_addr_forms(bad):
    with pytest.raises(ValueError):
        parse_address(bad)
