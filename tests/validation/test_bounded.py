"""What keeps a validation result bounded, piece by piece: a long table summarised as it is read (and read
a line at a time, with the old errors for empty, binary and oversized output), the store keeping every
file under the size the agent reads, the agent skipping a larger one unread, and ``lockstep validate``
saying so when one result alone would not fit."""
from __future__ import annotations

import io
import logging

import pytest

from lockstep.exporters.collectors.validation import ValidationCollector, ValidationOptions
from lockstep.validation.lines import Lines
from lockstep.validation.model import Figure, ParseError
from lockstep.validation.nccl import MAX_RANKS, parse_nccl, parse_nccl_lines
from lockstep.validation.parsers import MAX_BYTES, parse, parse_file
from lockstep.validation.perftest import parse_perftest
from lockstep.validation.result import Result
from lockstep.validation.sizetable import MAX_ROWS, SUMMARY, SizeTable
from lockstep.validation.store import MAX_SERIES_BYTES, Store, StoreError, read_series, series_file
from tests.helpers.nccl_output import write
from tests.helpers.paths import FIXTURES

V = FIXTURES / "validation"


def nccl_text(rows: int, step: int = 1024, hosts=("gpu-a01",)) -> str:
    out = io.StringIO()
    write(out, rows, step, hosts)
    return out.getvalue()


def test_a_table_up_to_the_limit_is_kept_whole_and_a_longer_one_summarised():
    whole = parse_nccl(nccl_text(MAX_ROWS)).detail
    assert len(whole["rows"]) == MAX_ROWS and "row_count" not in whole   # as results were always stored
    long = parse_nccl(nccl_text(MAX_ROWS * 100)).detail
    assert long["row_count"] == MAX_ROWS * 100 and long["rows_kept"] == SUMMARY
    sizes = [row["size_bytes"] for row in long["rows"]]
    assert sizes == [1024 << k for k in range(13)] + [1024 * MAX_ROWS * 100]   # powers of two, then the largest


def test_ranks_are_counted_whole_and_listed_up_to_a_bound():
    hosts = tuple(f"gpu-{i:03d}" for i in range(MAX_RANKS // 8 + 10))
    parsed = parse_nccl(nccl_text(4, hosts=hosts))
    assert parsed.figure_map()["ranks"] == 8 * len(hosts) and parsed.hosts == hosts
    assert len(parsed.detail["ranks"]) == MAX_RANKS and parsed.detail["rank_count"] == 8 * len(hosts)


def test_perftest_keeps_a_sizes_lower_report_and_its_largest_size_past_the_limit():
    table = SizeTable(lambda new, old: new["bw"] < old["bw"], limit=4)
    for size, bw in ((1, 5), (2, 5), (2, 3), (3, 5), (4, 5), (5, 5), (4, 2), (9, 7), (9, 1)):
        table.add({"size_bytes": size, "bw": bw})
    assert table.count == 9
    assert [(r["size_bytes"], r["bw"]) for r in table.rows()] == [(1, 5), (2, 3), (4, 2), (9, 1)]
    text = (V / "ib_loopback_all_sizes.log").read_text()
    assert parse_perftest(text).detail == parse_file("perftest", V / "ib_loopback_all_sizes.log").detail


@pytest.mark.parametrize("kind,name", [("nccl", "nccl_allreduce.log"), ("nccl", "nccl_mpirun_tagged.constructed.log"),
                                       ("perftest", "ib_loopback_all_sizes.log"), ("gpu-burn", "gpu_burn.log")])
def test_a_file_read_a_line_at_a_time_parses_as_its_whole_text(kind, name):
    path = V / name
    assert parse_file(kind, path) == parse(kind, path.read_text(errors="replace"), str(path))


@pytest.mark.parametrize("data,line,reason", [
    (b"", 1, "empty output"), (b" \n\t\n", 1, "empty output"),
    (b"# nccl-tests version 2.18.2\nsize count\x00type\n", 2, "binary data"),
])
def test_empty_and_binary_output_are_the_errors_they_were(data, line, reason):
    with pytest.raises(ParseError) as caught:
        parse_nccl_lines(Lines.of_file(io.BytesIO(data), "out.log", MAX_BYTES))
    assert (caught.value.line, caught.value.reason.split(",")[0]) == (line, reason)


def test_an_output_over_the_cap_is_refused_unread_or_while_read(tmp_path):
    big = tmp_path / "big.log"
    with open(big, "wb") as f:
        f.truncate(MAX_BYTES + 1)   # sparse: its size alone refuses it
    with pytest.raises(ParseError, match="larger than 64 MiB"):
        parse_file("nccl", big)
    piped = io.BytesIO(nccl_text(100).encode())   # not a file on disk: counted as it is read
    with pytest.raises(ParseError, match="larger than 0 MiB"):
        parse_nccl_lines(Lines.of_file(piped, "pipe", 1000))


def _result(started: float, figures: int, test: str = "fio-many-jobs") -> Result:
    return Result("fio", test, ("node00",), "pass", started, 60.0,
                  tuple(Figure("read_bw", "bytes_per_second", 1e9 + started, f"job{j}") for j in range(figures)))


@pytest.mark.slow
def test_the_store_drops_the_oldest_history_to_keep_a_file_under_the_cap(tmp_path):
    store = Store(tmp_path, durable=False)
    for run in range(30):
        store.write(_result(1767225600.0 + run * 86400, 4000))
    path = series_file(tmp_path, "node00", "fio", "fio-many-jobs", 1)
    doc = read_series(path)
    assert path.stat().st_size <= MAX_SERIES_BYTES
    assert 1 < len(doc["history"]) < 30 and doc["history"][-1]["started"] == doc["latest"]["started"]
    assert doc["latest"]["started"] == 1767225600.0 + 29 * 86400
    assert len(doc["baseline"]["history"]) == 4000   # from the runs still held


def test_a_result_too_large_alone_is_refused_with_a_message(tmp_path):
    with pytest.raises(StoreError, match="more than the 4 MiB the node agent reads"):
        Store(tmp_path, durable=False).write(_result(1767225600.0, 60_000))
    assert not list(tmp_path.rglob("*.json"))


def test_the_collector_skips_a_file_over_the_cap_without_reading_it(tmp_path, caplog, monkeypatch):
    store = Store(tmp_path, durable=False)
    store.write(_result(1767225600.0, 2, "small"))
    big = series_file(tmp_path, "node00", "fio", "big", 1)
    big.write_bytes(b"{" + b" " * MAX_SERIES_BYTES + b"}")
    read = []
    import lockstep.exporters.collectors.validation as collector_module
    monkeypatch.setattr(collector_module, "read_series", lambda path: read.append(path) or read_series(path))
    collector = ValidationCollector(ValidationOptions(tmp_path, "node00"))
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            tests = {s.labels[1] for s in collector.collect()}
    assert tests == {"small"} and [str(p) for p in read] == [str(series_file(tmp_path, "node00", "fio", "small", 1))]
    assert sum("larger than the 4 MiB" in r.getMessage() for r in caplog.records) == 1
