"""The node agent's ``validation`` collector on a results directory written by the real store from real outputs."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from lockstep.exporters import cli, registry
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.validation.parsers import parse_file
from lockstep.validation.result import Result, from_parsed
from lockstep.validation.store import Store, series_file
from tests.helpers.paths import FIXTURES

V = FIXTURES / "validation"
T0 = 1767225600.0   # 2026-01-01


def fill(root: Path) -> Store:
    """node00: four daily all-reduce runs (the last 30 % low), perftest, failed DCGM, fio, gpu-burn and a
    hung diagnostic; node01 (same shared directory): one all-reduce run."""
    store = Store(root)
    allreduce = parse_file("nccl", V / "nccl_allreduce.log")
    for day in range(4):
        scaled = allreduce if day < 3 else _scaled(allreduce, 0.7)
        store.write(from_parsed(scaled, "all_reduce_perf", ("node00",), T0 + day * 86400, 95.0, "f"))
    for kind, name, test in (("perftest", "ib_loopback_8M_size.log", "ib_write_bw/mlx5_0"),
                             ("dcgm-diag", "dcgm_diag_r3_fail.constructed.json", "diag-r3"),
                             ("fio", "disk_performance.log", "fio-randrw"), ("gpu-burn", "gpu_burn.log", "gpu-burn")):
        store.write(from_parsed(parse_file(kind, V / name), test, ("node00",), T0, 60.0, name))
    store.write(Result("dcgm-diag", "diag-r1", ("node00",), "timeout", T0, 600.0, message="killed after 600 s"))
    store.write(from_parsed(allreduce, "all_reduce_perf", ("node01",), T0, 95.0, "f"))
    return store


def _scaled(parsed, factor):
    from dataclasses import replace
    return replace(parsed, figures=tuple(replace(f, value=f.value * factor) if f.unit == "bytes_per_second" else f
                                         for f in parsed.figures))


def collector(results_dir: Path, node: str = "node00"):
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(), [])
    args = parser.parse_args(["exporter", "--collector.disable-defaults", "--collector.validation",
                              f"--validation.results-dir={results_dir}", f"--node.name={node}.cluster.example"])
    config = cli.config_from_args(args)
    return registry.load()["validation"].factory(config)


def render(c) -> str:
    families: dict = {}
    Encoder().add(families, c.collect())
    return render_text(families)


def test_golden_exposition(tmp_path, golden):
    # Reviewed against the inputs: the 4th all-reduce run is 0.7 x 68.4048 GB/s with a history baseline of
    # 68.4048 GB/s (three identical earlier runs); perftest 24056.72 MiB/s; DCGM memory fails on gpu3; the
    # hung diag-r1 has status timeout and no figures; node01's result is not node00's.
    fill(tmp_path)
    golden("validation/node00.prom", render(collector(tmp_path)))


def test_a_new_result_is_served_on_the_next_scrape(tmp_path):
    store = fill(tmp_path)
    c = collector(tmp_path)
    assert 'status="timeout"' in render(c)
    store.write(Result("dcgm-diag", "diag-r1", ("node00",), "pass", T0 + 86400, 90.0))
    text = render(c)
    assert 'test="diag-r1",scale="1",status="pass"} 1' in text and 'status="timeout"' not in text


def test_an_unreadable_file_loses_only_itself(tmp_path, caplog):
    fill(tmp_path)
    series_file(tmp_path, "node00", "fio", "fio-randrw", 1).write_text("not json")
    c = collector(tmp_path)
    scraper = Scraper({"validation": c})
    text = scraper.render()
    assert 'lockstep_scrape_collector_success{collector="validation"} 1' in text
    assert 'kind="fio"' not in text and 'kind="gpu-burn"' in text
    assert "skipping unreadable validation result" in caplog.text


def test_no_results_directory_is_no_samples(tmp_path):
    assert render(collector(tmp_path / "missing")) == ""


def test_the_collector_is_on_by_default_with_the_documented_default_directory():
    spec = registry.load()["validation"]
    assert spec.default_enabled
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(), [])
    config = cli.config_from_args(parser.parse_args(["exporter", "--node.name=n1"]))
    assert spec.factory(config).node_dir == os.path.join("/var/lib/lockstep/validation", "n1")


@pytest.mark.parametrize("metric", ["lockstep_validation_bandwidth_bytes_per_second",
                                    "lockstep_validation_check_status"])
def test_no_label_carries_a_node_or_an_unbounded_value(tmp_path, metric):
    fill(tmp_path)
    lines = [line for line in render(collector(tmp_path)).splitlines() if line.startswith(metric + "{")]
    assert lines and all("node" not in line.split("{")[1].split("}")[0].replace("node00", "") for line in lines)
    assert all("message" not in line for line in lines)
