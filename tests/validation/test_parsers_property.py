"""Property-based tests (hypothesis) of the validation parsers of tables (nccl-tests, perftest, gpu-burn):
on any input they raise nothing but ParseError; read a line at a time from a file they give what the
whole text gives; and whatever the length of a table, a result keeps a bounded part of it, with the
figures computed from every row. The DCGM diagnostic's parser, given real documents with any JSON in
place of some results or of their fields, raises nothing but ParseError and keeps every other result.
The coverage-guided search is ``make fuzz`` (targets nccl, perftest, gpu-burn)."""
from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.validation.lines import Lines
from lockstep.validation.model import ParseError
from lockstep.validation.parsers import LINE_PARSERS, MAX_BYTES, parse
from lockstep.validation.sizetable import MAX_ROWS, SizeTable
from tests.helpers.corrupt import NOISE, spliced
from tests.helpers.nccl_output import write
from tests.helpers.paths import FIXTURES

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
V = FIXTURES / "validation"
TABLES = st.one_of(*(spliced(V / name).map(lambda text, kind=kind: (kind, text)) for kind, name in (
    ("nccl", "nccl_allreduce.log"), ("nccl", "nccl_v2.18_two_nodes.constructed.log"),
    ("nccl", "nccl_per_iter.constructed.log"), ("perftest", "ib_loopback_all_sizes.log"),
    ("perftest", "ib_write_lat.constructed.log"), ("gpu-burn", "gpu_burn.log"))),
    st.tuples(st.sampled_from(sorted(LINE_PARSERS)), NOISE))


def outcome(run):
    try:
        return run()
    except ParseError as exc:
        return str(exc)


@FAST
@given(TABLES)
def test_a_table_parser_raises_only_parse_error_and_reads_a_file_as_its_text(case):
    kind, text = case
    whole = outcome(lambda: parse(kind, text, "out"))
    streamed = outcome(lambda: LINE_PARSERS[kind](Lines.of_file(io.BytesIO(text.encode()), "out", MAX_BYTES)))
    assert streamed == whole


@FAST
@given(st.integers(1, 3000), st.sampled_from([1, 8, 1000, 1024, 4096, 1 << 20]))
def test_a_result_keeps_a_bounded_part_of_any_nccl_table(rows, step):
    out = io.StringIO()
    peak, avg = write(out, rows, step)
    parsed = parse("nccl", out.getvalue(), "out")
    kept = parsed.detail["rows"]
    assert len(kept) <= MAX_ROWS and parsed.detail.get("row_count", len(kept)) == rows
    assert parsed.figure_map()["peak_busbw_bytes_per_second"] == float(f"{peak}e9")   # over every row, as printed
    assert kept[-1]["size_bytes"] == rows * step


@FAST
@given(st.lists(st.integers(0, 1 << 40), max_size=400), st.integers(1, 80))
def test_a_size_table_is_bounded_and_keeps_each_power_of_twos_smallest_and_the_largest(sizes, limit):
    table = SizeTable(limit=limit)
    for size in sizes:
        table.add({"size_bytes": size})
    rows = [r["size_bytes"] for r in table.rows()]
    assert table.count == len(sizes)
    if len(sizes) <= limit:
        assert rows == sizes
    else:
        assert len(rows) <= 42 and max(sizes) in rows
        assert {min(s for s in sizes if s.bit_length() == b) for b in {s.bit_length() for s in sizes}} <= set(rows)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)
RESULT_FIELDS = st.sampled_from(["entity_id", "entity_group", "gpu_ids", "status", "warnings"])
DCGM_DOCS = {name: json.loads((V / name).read_text().split("\n", 1)[1] if "3x" in name else (V / name).read_text())
             for name in ("dcgm_diag_r3_fail.constructed.json", "dcgm_diag_r1_3x.constructed.json")}


def _results(doc: dict) -> list[tuple[str, list]]:
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    return [(t["name"], t["results"]) for c in diag["test_categories"] for t in c["tests"] if t]


@FAST
@given(st.sampled_from(sorted(DCGM_DOCS)), st.data())
def test_a_malformed_dcgm_result_loses_only_itself(name, data):
    doc = json.loads(json.dumps(DCGM_DOCS[name]))
    before = {(c.name, c.subject): c.status for c in parse("dcgm-diag", json.dumps(doc), "d").checks}
    tests = _results(doc)
    touched = set()
    for _ in range(data.draw(st.integers(1, 4))):
        test, results = tests[data.draw(st.integers(0, len(tests) - 1))]
        index = data.draw(st.integers(0, len(results) - 1))
        touched.add((test, index))
        if isinstance(results[index], dict) and data.draw(st.booleans()):
            field, value = data.draw(RESULT_FIELDS), data.draw(JSON | st.just(None))
            results[index].pop(field, None) if value is None else results[index].__setitem__(field, value)
        else:
            results[index] = data.draw(JSON)
    try:
        after = {(c.name, c.subject): c.status for c in parse("dcgm-diag", json.dumps(doc), "d").checks}
    except ParseError:
        return   # only a result's status is still the whole document's error (an unknown DCGM status)
    for test, results in tests:
        for index, result in enumerate(results):
            if (test, index) in touched:
                continue
            subjects = [f"{result['entity_group'].lower()}{result['entity_id']}"] if "entity_group" in result else \
                [f"gpu{i}" for i in str(result["gpu_ids"]).split(",")]
            assert all(after[(test, s)] == before[(test, s)] for s in subjects)
