"""The results store: atomic per-series files, multi-node tagging, own-history baselines, bounds."""
from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time

import pytest

from lockstep.validation.baseline import BaselinePolicy
from lockstep.validation.model import Check, Figure
from lockstep.validation.result import Result
from lockstep.validation.store import Limits, Store, StoreError, read_series, series_file

T0 = 1767225600.0


def result(value: float = 100e9, status: str = "pass", nodes=("node00",), test="all_reduce_perf", day=0) -> Result:
    return Result("nccl", test, nodes, status, T0 + day * 86400, 60.0,
                  (Figure("avg_busbw", "bytes_per_second", value), Figure("ranks", "", 8.0),
                   Figure("out_of_bounds", "errors", 0.0)),
                  (Check("data", "pass" if status == "pass" else "fail"),), "2.18.2")


def test_result_lands_in_its_series_file(tmp_path):
    [path] = Store(tmp_path).write(result(), raw="the output\n")
    assert path == tmp_path / "node00" / "nccl" / "all_reduce_perf@1.json"
    doc = read_series(path)
    assert doc["latest"]["figures"] == {"avg_busbw_bytes_per_second": 100e9, "ranks": 8.0, "out_of_bounds_errors": 0.0}
    assert doc["history"] == [{"started": T0, "status": "pass", "figures": {"avg_busbw_bytes_per_second": 100e9}}]
    assert path.with_suffix(".out").read_text() == "the output\n"
    assert not list(tmp_path.rglob("*.tmp"))


def test_multi_node_result_is_written_under_every_node(tmp_path):
    paths = Store(tmp_path).write(result(nodes=("gpu-a02.cluster", "gpu-a01")))
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == ["gpu-a01/nccl/all_reduce_perf@2.json",
                                                                    "gpu-a02/nccl/all_reduce_perf@2.json"]
    assert read_series(paths[1])["latest"]["nodes"] == ["gpu-a01", "gpu-a02"]


def test_history_baseline_is_the_median_of_previous_good_runs(tmp_path):
    store = Store(tmp_path, Limits(baseline=BaselinePolicy(runs=4, min_runs=3)))
    values = [100, 104, 98, 50, 102, 101, 70]   # 50 is a failed run: never part of a baseline
    for day, v in enumerate(values):
        [path] = store.write(result(v * 1e9, "fail" if v == 50 else "pass", day=day))
        doc = read_series(path)
        baseline = doc["baseline"]["history"].get("avg_busbw_bytes_per_second")
        good_before = [x for x in values[:day] if x != 50][-4:]
        if len(good_before) < 3:
            assert baseline is None, day
        else:
            assert baseline == statistics.median(good_before) * 1e9, day
    # last write (70): previous good runs 104, 98, 102, 101 -> median 101.5
    assert baseline == 101.5e9
    assert len(doc["history"]) == len(values)


def test_history_is_bounded(tmp_path):
    store = Store(tmp_path, Limits(history_runs=5))
    for day in range(12):
        [path] = store.write(result(day=day))
    assert [e["started"] for e in read_series(path)["history"]] == [T0 + d * 86400 for d in range(7, 12)]


def test_two_tests_with_one_file_name_are_refused(tmp_path):
    store = Store(tmp_path)
    store.write(result(test="ib_write_bw/mlx5_0"))
    with pytest.raises(StoreError, match="holds test 'ib_write_bw/mlx5_0'"):
        store.write(result(test="ib_write_bw_mlx5_0"))


def test_series_count_is_capped_and_stale_series_pruned(tmp_path):
    store = Store(tmp_path, Limits(max_series=2, max_age_s=30 * 86400))
    old, _ = store.write(result(test="a")) + store.write(result(test="b"))
    with pytest.raises(StoreError, match="already holds 2"):
        store.write(result(test="c"))
    os.utime(old, (time.time() - 40 * 86400,) * 2)
    store.write(result(test="b"))            # any write prunes what has not run for max_age_s
    assert not old.exists()
    store.write(result(test="c"))            # room again


def test_unreadable_series_is_set_aside_not_lost(tmp_path):
    store = Store(tmp_path)
    [path] = store.write(result())
    path.write_text("{ half a file")
    store.write(result(day=1))
    assert len(read_series(path)["history"]) == 1
    assert [p.read_text() for p in path.parent.glob("*.corrupt-*")] == ["{ half a file"]


def _writer(root: str, offset: int) -> None:
    store = Store(root)
    for day in range(15):
        store.write(result(day=offset + day))


@pytest.mark.integration
def test_concurrent_writers_lose_no_run(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), offset)) for offset in (0, 100)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    history = read_series(series_file(tmp_path, "node00", "nccl", "all_reduce_perf", 1))["history"]
    assert len(history) == 30 and len({e["started"] for e in history}) == 30


def test_node_names_must_be_plain_host_names(tmp_path):
    with pytest.raises(ValueError, match="not a plain host name"):
        result(nodes=("node[01-02]",))
    assert json.loads(json.dumps(result(nodes=("n1.example.org",)).to_dict()))["nodes"] == ["n1"]
