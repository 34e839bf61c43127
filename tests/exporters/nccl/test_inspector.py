"""NCCL Inspector's Prometheus files parsed (``lockstep.exporters.nccl.inspector``): NCCL's own 2.30 example and a
2.29 file from its format strings (tests/fixtures/nccl-inspector, README), a file cut anywhere refused whole, and
the simulator writing what NCCL's writer would."""
from __future__ import annotations

import pytest

from lockstep.exporters.nccl import inspector as fmt
from lockstep.simulator import inspector as sim
from tests.helpers import paths

INSPECTOR = paths.FIXTURES / "nccl-inspector"
README_2_30 = (INSPECTOR / "readme-v2.30.7-example.prom").read_bytes()
CONSTRUCTED_2_29 = (INSPECTOR / "v2.29-constructed.prom").read_bytes()


def test_nccls_own_2_30_example_is_one_collective_and_one_p2p_bucket():
    coll, p2p = fmt.parse(README_2_30)
    assert (coll.kind, coll.layout, p2p.kind, p2p.layout) == ("collective", "2.30", "p2p", "2.30")
    assert dict(coll.labels) == {"version": "v5.1", "slurm_job_id": "unknown", "node": "nvl72004-T01", "gpu": "GPU0",
                                 "comm_name": "DP Group 0", "n_nodes": "1", "nranks": "4", "collective": "AllReduce",
                                 "message_size": "4-5GB", "algo_proto": "Ring_ll"}
    assert dict(coll.values) == {"nccl_bus_bandwidth_gbs": 678.263, "nccl_collective_exec_time_microseconds": 9498.47}
    assert (p2p.operation, p2p.label("message_size"), dict(p2p.values)) == (
        "Send", "512-513MB", {"nccl_p2p_bus_bandwidth_gbs": 464.9, "nccl_p2p_exec_time_microseconds": 1154.87})
    assert coll.communicator == p2p.communicator == ("", "DP Group 0", "4", "1")


def test_the_2_29_layout_keeps_its_labels_but_the_two_that_change_every_rewrite():
    allreduce, allgather = fmt.parse(CONSTRUCTED_2_29)
    assert allreduce.layout == allgather.layout == "2.29"
    assert [k for k, _ in allreduce.labels] == ["comm_id", "hostname", "rank", "slurm_job", "slurm_job_id", "nranks",
                                                "n_nodes", "gpu_device_id", "collective", "message_size"]
    assert (allreduce.label("comm_id"), allreduce.label("rank"), allreduce.operation) == (
        "0xd152c00f111816", "4", "AllReduce")
    assert dict(allreduce.values) == {"nccl_algorithm_bandwidth_gbs": 238.609, "nccl_bus_bandwidth_gbs": 417.566,
                                      "nccl_collective_exec_time_microseconds": 9000.0}
    assert allgather.communicator == ("0x3a6f0e2d5c7b11", "", "2", "1")


def test_a_communicator_written_twice_in_one_interval_counts_once_the_later():
    """2.29 appends between two truncations: the later block of a communicator's collective wins."""
    later = CONSTRUCTED_2_29.replace(b'coll_sn="228924"', b'coll_sn="229001"').replace(b"} 9000\n", b"} 9100\n")
    first, *_ = fmt.parse(CONSTRUCTED_2_29 + later)
    assert len(fmt.parse(CONSTRUCTED_2_29 + later)) == 2
    assert dict(first.values)["nccl_collective_exec_time_microseconds"] == 9100.0


def _boundaries(data: bytes, lines_per_bucket: int) -> set[int]:
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    return {0} | {ends[i] for i in range(lines_per_bucket - 1, len(ends), lines_per_bucket)}


@pytest.mark.parametrize("data,lines", [(README_2_30, 2), (CONSTRUCTED_2_29, 3)], ids=["2.30", "2.29"])
def test_a_file_cut_anywhere_but_between_buckets_is_refused_whole(data, lines):
    whole = fmt.parse(data)
    boundaries = _boundaries(data, lines)
    for cut in range(len(data)):
        if cut in boundaries:
            assert set(fmt.parse(data[:cut])) <= set(whole)
            continue
        with pytest.raises(fmt.InspectorFileError) as err:
            fmt.parse(data[:cut])
        assert err.value.reason == "truncated", cut


@pytest.mark.parametrize("line", [
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="4-5GB"} NaN\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="4-5GB"} +Inf\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="4-5GB"} 1 1700000000000\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="4-5GB" 1\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",collective="x",message_size="4-5GB"} 1\n',
    b'nccl_bus_bandwidth_gbs{collective="All"Reduce",message_size="4-5GB"} 1\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce"} 1\n',
    b'nccl_p2p_bus_bandwidth_gbs{message_size="4-5GB"} 1\n',
    b'nccl_bus_bandwidth_gbs{collective="AllReduce",message_size="4-5GB"}\t1\n',
    b'nccl_bus_bandwidth_gbs{collective="\xff",message_size="4-5GB"} 1\n',
    b"{} 1\n",
], ids=range(11))
def test_a_line_that_is_not_the_format_refuses_the_file(line):
    with pytest.raises(fmt.InspectorFileError) as err:
        fmt.parse(README_2_30 + line)
    assert err.value.reason == "malformed"


def test_other_metric_names_comments_and_blank_lines_are_left_alone():
    extra = b"# a comment\n\nnccl_future_metric{x=\"1\"} 2\n"
    assert fmt.parse(extra + README_2_30) == fmt.parse(README_2_30)
    assert fmt.parse(b"") == ()


def test_escaped_label_values_are_read_as_the_exposition_format_says():
    line = b'nccl_p2p_bus_bandwidth_gbs{comm_name="a\\"b\\\\c\\nd",p2p_operation="Send",message_size="1-2KB"} 3\n'
    line += line.replace(b"_bus_bandwidth_gbs", b"_exec_time_microseconds")
    (bucket,) = fmt.parse(line)
    assert bucket.label("comm_name") == 'a"b\\c\nd'


@pytest.mark.parametrize("text,size", [("4-5GB", 4 << 30), ("512-513MB", 512 << 20), ("8-9KB", 8 << 10), ("0B", 0),
                                       ("2.00GB", 2 << 30), ("512B", 512), ("1.50KB", 1536), ("big", -1)])
def test_message_sizes_of_both_layouts(text, size):
    assert fmt.message_size_bytes(text) == size


@pytest.mark.parametrize("size,range_,human", [(4 * 2**30 + 12345, "4-5GB", "4.00GB"), (512 * 2**20, "512-513MB",
                                                                                           "512.00MB"),
                                               (25 * 2**20, "25-26MB", "25.00MB"), (8192, "8-9KB", "8.00KB"),
                                               (512, "512-513B", "512B"), (0, "0B", "0B")])
def test_the_simulator_formats_sizes_as_nccls_writers_do(size, range_, human):
    assert (sim.size_range(size), sim.size_human(size)) == (range_, human)


def test_the_file_name_is_the_cuda_uuid_without_prefix():
    m = fmt.FILE_NAME.match("nccl_inspector_metrics_2f6c1c1e-0b3a-4c55-9d7e-000000000001.prom")
    assert m and m.group(1) == "2f6c1c1e-0b3a-4c55-9d7e-000000000001"
    for name in ("nccl_inspector_metrics_GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001.prom",
                 "nccl_inspector_metrics_2f6c1c1e-0b3a-4c55-9d7e-000000000001.prom.tmp", "host-pid12.log"):
        assert not fmt.FILE_NAME.match(name)
