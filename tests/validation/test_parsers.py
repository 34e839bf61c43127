"""Validation parsers on real tool outputs (tests/fixtures/validation/README.md).

Every expected figure below was read by hand from the fixture file named beside it (footer lines, the
largest-size row, the JSON keys) and converted to base units by hand: nccl-tests GB/s x 1e9, perftest
MB/s x 2**20 and Mpps x 1e6, fio ns x 1e-9, gpu-burn Gflop/s x 1e9. Peak bus bandwidths were checked
with an awk one-liner over the rows, independently of the parser.
"""
from __future__ import annotations

import json

import jsonschema
import pytest

from lockstep.validation.model import ParseError
from lockstep.validation.parsers import parse, parse_file
from tests.helpers.paths import FIXTURES

V = FIXTURES / "validation"
GB, MIB = 1e9, 1 << 20

# file: (avg busbw GB/s from the footer, peak busbw GB/s over all rows, rows)
NCCL_REAL = {
    "nccl_allreduce.log": (68.4048, 235.26, 34),       # line 50
    "nccl_allgather.log": (58.2651, 230.07, 34),       # line 52
    "nccl_alltoall.log": (58.6481, 226.16, 34),        # line 51; no op under its 'redop' column
    "nccl_broadcast.log": (64.8653, 234.70, 34),       # line 52; 'root' column
    "nccl_reduce.log": (65.018, 231.28, 34),           # line 52; 'redop' and 'root'; peak at 4 GiB
    "nccl_reducescatter.log": (60.168, 231.52, 34),
}


@pytest.mark.parametrize("name", sorted(NCCL_REAL))
def test_nccl_real_outputs(name):
    avg, peak, rows = NCCL_REAL[name]
    parsed = parse_file("nccl", V / name)
    figures = parsed.figure_map()
    assert figures["avg_busbw_bytes_per_second"] == pytest.approx(avg * GB, rel=1e-12)
    assert figures["peak_busbw_bytes_per_second"] == pytest.approx(peak * GB, rel=1e-12)
    assert figures["out_of_bounds_errors"] == 0 and figures["ranks"] == 8
    assert len(parsed.detail["rows"]) == rows and parsed.status == "pass"
    assert parsed.hosts == ("localhost",) and parsed.test == ""   # this version names neither


def test_nccl_rows_keep_both_placements_per_size():
    rows = parse_file("nccl", V / "nccl_allreduce.log").detail["rows"]
    last = rows[-1]   # 8589934592 2147483648 float sum 63896 134.44 235.26 N/A 63959 134.30 235.03 N/A
    assert (last["size_bytes"], last["count"], last["type"], last["redop"], last["root"]) == (
        8589934592, 2147483648, "float", "sum", None)
    assert last["out_of_place"] == {"time_seconds": pytest.approx(0.063896), "algbw_bytes_per_second": 134.44e9,
                                    "busbw_bytes_per_second": 235.26e9, "check": None}
    assert last["in_place"]["busbw_bytes_per_second"] == 235.03e9
    broadcast = parse_file("nccl", V / "nccl_broadcast.log").detail["rows"][-1]
    assert broadcast["root"] == 0 and broadcast["redop"] is None
    alltoall = parse_file("nccl", V / "nccl_alltoall.log").detail["rows"][-1]
    assert alltoall["redop"] == "" and alltoall["in_place"]["busbw_bytes_per_second"] == 226.16e9


# Constructed from nccl-tests' own printf formats (README): newer layouts, hosts, version, collective.
NCCL_LAYOUTS = {
    "nccl_v2.18_two_nodes.constructed.log": (238.789, ("gpu-a01", "gpu-a02"), 16, 8),   # -Z timestamps
    "nccl_per_iter.constructed.log": (287.31, ("gpu-b07",), 8, 4),                       # -I per-iteration
    "nccl_mpirun_tagged.constructed.log": (96.8817, ("gpu-c01", "gpu-c02"), 8, 3),       # [1,0]<stdout>:
    "nccl_no_hash.constructed.log": (218.31, ("gpu-d03",), 8, 2),                        # no '#' anywhere
}


@pytest.mark.parametrize("name", sorted(NCCL_LAYOUTS))
def test_nccl_layouts(name):
    avg, hosts, ranks, rows = NCCL_LAYOUTS[name]
    parsed = parse_file("nccl", V / name)
    assert parsed.figure_map()["avg_busbw_bytes_per_second"] == pytest.approx(avg * GB, rel=1e-12)
    assert (parsed.hosts, parsed.figure_map()["ranks"], len(parsed.detail["rows"])) == (hosts, ranks, rows)
    assert (parsed.test, parsed.tool_version) == ("all_reduce_perf", "2.18.2")
    assert parsed.detail["rows"][0]["out_of_place"]["check"] == 0   # '#wrong' is a count here


def test_nccl_out_of_bounds_fails_the_data_check():
    text = (V / "nccl_allreduce.log").read_text().replace("# Out of bounds values : 0 OK",
                                                          "# Out of bounds values : 12 FAILED")
    parsed = parse("nccl", text, "x.log")
    assert parsed.status == "fail" and parsed.figure_map()["out_of_bounds_errors"] == 12
    assert [(c.name, c.status, c.message) for c in parsed.checks] == [("data", "fail", "12 out-of-bounds values")]


def test_perftest_write_bw():
    one = parse_file("perftest", V / "ib_loopback_8M_size.log").figure_map()
    # " 8388608    20000   24056.74   24056.72   0.003007" (client and server both print it)
    assert one == {"bw_peak_bytes_per_second": 24056.74 * MIB, "bw_average_bytes_per_second": 24056.72 * MIB,
                   "msg_rate_per_second": 3007.0}
    # perftest's MB is 2**20: bandwidth / size is the printed message rate
    assert one["bw_average_bytes_per_second"] / 8388608 == pytest.approx(one["msg_rate_per_second"], rel=1e-4)
    sizes = parse_file("perftest", V / "ib_loopback_all_sizes.log")
    assert sizes.test == "ib_write_bw/ib0" and len(sizes.detail["rows"]) == 23
    assert sizes.figure_map()["bw_average_bytes_per_second"] == 23240.68 * MIB   # the 8388608 row
    assert sizes.detail["rows"][0] == {"size_bytes": 2, "iterations": 2000, "bw_peak_bytes_per_second": 5.32 * MIB,
                                       "bw_average_bytes_per_second": 5.30 * MIB, "msg_rate_per_second": 2778732.0}


def test_perftest_latency_and_gbits():
    lat = parse_file("perftest", V / "ib_write_lat.constructed.log")
    assert lat.test == "ib_write_lat/mlx5_0"
    assert lat.figure_map()["t_typical_seconds"] == 2.44e-6 and lat.figure_map()["t_p99_9_seconds"] == 6.12e-6
    text = (V / "ib_loopback_8M_size.log").read_text().replace("MB/sec", "Gb/sec")
    assert parse("perftest", text, "g.log").figure_map()["bw_average_bytes_per_second"] == 24056.72e9 / 8


def test_fio_json():
    parsed = parse_file("fio", V / "disk_performance.log")
    f = parsed.figure_map()
    assert parsed.tool_version == "3.16" and parsed.status == "pass"
    assert f["rand_read_write.read_bw_bytes_per_second"] == 348743777
    assert f["rand_read_write.read_iops_per_second"] == 85138.890741
    assert f["rand_read_write.read_lat_p99_seconds"] == 2244608e-9       # lat_ns percentile 99.000000
    assert f["rand_read_write.write_lat_p50_seconds"] == 1531904e-9
    assert f["rand_read_write.write_lat_p99_9_seconds"] == 2605056e-9
    assert not any(".trim_" in key for key in f)                         # trim moved no data


def test_gpu_burn():
    parsed = parse_file("gpu-burn", V / "gpu_burn.log")
    f = parsed.figure_map()
    # the last progress record: 16942 - 17093 - 16957 - 16926 - 16890 - 16950 - 17010 - 16926 Gflop/s
    assert [f[f"gpu{i}.flop_per_second"] / GB for i in range(8)] == [16942, 17093, 16957, 16926, 16890, 16950,
                                                                        17010, 16926]
    assert all(f[f"gpu{i}.compute_errors"] == 0 for i in range(8)) and parsed.status == "pass"
    faulty = (V / "gpu_burn.log").read_text().replace("GPU 6: OK", "GPU 6: FAULTY")
    assert [(c.subject, c.status) for c in parse("gpu-burn", faulty, "g").checks if c.status != "pass"] == [
        ("gpu6", "fail")]


def _statuses(parsed):
    return {(c.name, c.subject): c.status for c in parsed.checks}


def test_dcgm_4x_documents_validate_against_nvidias_schema():
    # The schema names no draft ("http://json-schema.org/schema#"); its keywords are all draft-07's.
    validator = jsonschema.Draft7Validator(json.loads((V / "dcgm_diag_schema.json").read_text()))
    for name in ("dcgm_diag_r3_pass", "dcgm_diag_r3_fail", "dcgm_diag_runtime_error"):
        validator.validate(json.loads((V / f"{name}.constructed.json").read_text()))
    with pytest.raises(jsonschema.ValidationError):   # the 3.x shape is not what the schema describes
        validator.validate(json.loads((V / "dcgm_diag_r1_3x.constructed.json").read_text().split("\n", 1)[1]))


def test_dcgm_diag():
    passed = parse_file("dcgm-diag", V / "dcgm_diag_r3_pass.constructed.json")
    assert passed.status == "pass" and passed.tool_version == "4.1.1" and len(passed.checks) == 7 * 8
    failed = parse_file("dcgm-diag", V / "dcgm_diag_r3_fail.constructed.json")
    statuses = _statuses(failed)
    assert failed.status == "fail" and statuses[("memory", "gpu3")] == "fail" and statuses[("pcie", "gpu5")] == "warn"
    assert {s for (name, _), s in statuses.items() if name == "targeted power"} == {"skip"}
    assert sum(s == "pass" for s in statuses.values()) == 56 - 2 - 8
    memory = next(c for c in failed.checks if c.status == "fail")
    assert "DCGM_FR_FAULTY_MEMORY" in memory.message
    error = parse_file("dcgm-diag", V / "dcgm_diag_runtime_error.constructed.json")
    assert error.status == "error" and "fallen off the bus" in error.error


def test_dcgm_3x_document():
    parsed = parse_file("dcgm-diag", V / "dcgm_diag_r1_3x.constructed.json")
    assert parsed.tool_version == "3.3.9" and parsed.status == "fail"
    assert _statuses(parsed) == {**{("Denylist", f"gpu{i}"): "pass" for i in range(4)},
                                 **{("Persistence Mode", f"gpu{i}"): "fail" for i in range(4)},
                                 ("PCIe", "gpu2"): "skip"}


def _dcgm_with(edit) -> str:
    doc = json.loads((V / "dcgm_diag_r3_fail.constructed.json").read_text())
    tests = {t["name"]: t["results"] for c in doc["DCGM Diagnostic"]["test_categories"] for t in c["tests"]}
    edit(tests)
    return json.dumps(doc)


@pytest.mark.parametrize("edit,why", [
    (lambda tests: tests["memory"][3].pop("entity_id"), "no entity_id"),
    (lambda tests: tests["memory"][3].update(entity_id={"id": 3}), "is not an entity number"),
    (lambda tests: tests["memory"][3].update(entity_group=["GPU"]), "is not a DCGM entity group"),
    (lambda tests: tests["memory"].__setitem__(3, "GPU 3: Fail"), "not an object"),
])
def test_a_dcgm_result_naming_no_entity_loses_only_itself(edit, why):
    """Before: KeyError (or AttributeError) out of the parser, and the whole run lost. Now the result
    is a warning of its own test, and every other entity keeps its verdict."""
    parsed = parse("dcgm-diag", _dcgm_with(edit), "diag.json")
    statuses = _statuses(parsed)
    assert statuses[("memory", "result3")] == "warn" and ("memory", "gpu3") not in statuses
    lost = next(c for c in parsed.checks if c.subject == "result3")
    assert lost.message.startswith("unreadable DCGM result, not judged: ") and why in lost.message
    assert len(statuses) == 56 and statuses[("pcie", "gpu5")] == "warn" and statuses[("memory", "gpu4")] == "pass"
    assert parsed.status == "warn"   # the failing GPU's verdict is gone: not a pass


def test_dcgm_3x_gpu_ids_that_are_not_numbers_lose_only_their_result():
    text = (V / "dcgm_diag_r1_3x.constructed.json").read_text().replace('"gpu_ids" : "0,1,2,3"', '"gpu_ids" : [0]', 1)
    statuses = _statuses(parse("dcgm-diag", text, "diag.json"))
    assert statuses[("Denylist", "result0")] == "warn" and statuses[("Persistence Mode", "gpu0")] == "fail"


def _cut(name: str, lines: int) -> str:
    return "\n".join((V / name).read_text().split("\n")[:lines]) + "\n"


@pytest.mark.parametrize("kind,text,line,reason", [
    ("nccl", "", 1, "empty output"),
    ("nccl", "   \n\n", 1, "empty output"),
    ("nccl", _cut("nccl_allreduce.log", 30), 30, "truncated"),
    ("nccl", _cut("nccl_allreduce.log", 14), 14, "no result rows"),
    ("nccl", (V / "disk_performance.log").read_text(), 309, "no nccl-tests result table"),
    ("nccl", _cut("nccl_allreduce.log", 20).rstrip("\n")[:-20] + "\n", 20, "malformed result row"),
    ("nccl", (V / "nccl_allreduce.log").read_text().replace("   redop  ", " redop  op "), 14, "unknown nccl-tests column"),
    ("perftest", _cut("ib_loopback_all_sizes.log", 38), 38, "no perftest result rows"),
    ("perftest", (V / "nccl_allreduce.log").read_text(), 53, "no perftest result rows"),
    ("perftest", (V / "ib_write_lat.constructed.log").read_text().replace("usec]", "cycles]"), 21, "cycles"),
    ("perftest", (V / "ib_loopback_8M_size.log").read_text().replace("MsgRate[Mpps]", "MsgRate[Mpps] Extra"), 17,
     "unknown perftest result layout"),
    ("fio", _cut("disk_performance.log", 150), 151, "invalid JSON"),
    ("fio", (V / "gpu_burn.log").read_text(), 1, "no JSON document"),
    ("fio", '{"jobs": 3}', 1, 'no "fio version"'),
    ("dcgm-diag", _cut("dcgm_diag_r3_pass.constructed.json", 100), 101, "invalid JSON"),
    ("dcgm-diag", (V / "disk_performance.log").read_text(), 1, 'no "DCGM Diagnostic"'),
    ("dcgm-diag", (V / "dcgm_diag_r3_pass.constructed.json").read_text().replace('"Pass"', '"Inconclusive"', 1), 1,
     "unknown DCGM status"),
    ("dcgm-diag", '{"DCGM Diagnostic": {"version": ' + "9" * 5000 + "}}", 1, "invalid JSON"),
    ("dcgm-diag", '{"DCGM Diagnostic": ' + "[" * 100000, 1, "nested too deeply"),
    ("dcgm-diag", '{"DCGM Diagnostic": {"test_categories": {"tests": []}}}', 1, "not a list of objects"),
    ("dcgm-diag", '{"DCGM Diagnostic": {"test_categories": [{"tests": [1]}]}}', 1, "not a list of objects"),
    ("gpu-burn", _cut("gpu_burn.log", 55), 55, "truncated"),
    ("gpu-burn", (V / "nccl_allreduce.log").read_text(), 53, "no gpu-burn progress record"),
    ("gpu-burn", "GPU 0: OK\x00\x01\x02", 1, "binary data"),
])
def test_bad_output_is_an_error_naming_the_line(kind, text, line, reason):
    with pytest.raises(ParseError) as info:
        parse(kind, text, "out.log")
    assert (info.value.source, info.value.line) == ("out.log", line) and reason in info.value.reason
    assert str(info.value).startswith(f"out.log:{line}: ")
