"""The node agent with its default collectors on a full simulated H100 node (8 GPUs, 8 HCAs, 8 NICs,
Lustre + NFS + NVMe): the series budget of docs/architecture.md (at most 1,500), every lockstep_ family in the
catalog with the catalog's labels, every line parseable by prometheus_client, and every default collector
succeeding in a real ``lockstep exporter --sim.node-root`` process. Time budgets live in
bench/bench_node_agent.py, not here."""
from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from lockstep.exporters import cli, registry
from lockstep.exporters.catalog import CATALOG
from tests.helpers.paths import REPO

SERIES_BUDGET = 1500
# The collectors the budget was set for; a new default collector must be weighed against it
# (validation: 50 tests add about 500 series, bench/bench_validation.py; job-io: 4 per job and block device
# plus 2 per job, about 20 for a training job on a node with 4 disks; gds: about 25 plus 4 per GPU where nvidia-fs
# is loaded, none elsewhere; nvme: 1 per controller, 15 more per controller with --nvme.smart-command).
BUDGETED_DEFAULTS = {"gpu", "jobs", "infiniband", "roce", "pfc", "lustre", "nfs", "disk", "validation", "job-io", "gds",
                     "nvme"}
SCENARIO = ("name: budget-node\nseed: 3\nduration_s: 60\nsample_period_s: 5\n"
            "cluster: {nodes: 1, gpus_per_node: 8, nodes_per_rack: 1, rack_budget_watts: 60000}\n"
            "job: {job_id: '77', nodes: 1, step_time_s: 1.5, storage_read_bytes_per_step: 1.0e9}\n")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full node written by the real simulator (run for 10 simulated seconds, then stopped)."""
    work = tmp_path_factory.mktemp("budget")
    (work / "node.yaml").write_text(SCENARIO)
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "run", str(work / "node.yaml"), "--root",
                           str(work / "sim"), "--speed", "60", "--duration", "10"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    node = work / "sim" / "node00"
    # The budget is about a full node: make sure this one is, or the count below proves nothing.
    assert len(list((node / "sys/class/infiniband").iterdir())) == 8
    assert len(list((node / "ethtool").glob("*/statistics"))) == 8
    assert list((node / "proc/fs/lustre/llite").glob("*/stats"))
    assert "fstype nfs" in (node / "proc/self/mountstats").read_text()
    assert re.search(r" nvme\d+n\d+ ", (node / "proc/diskstats").read_text())
    return node


def defaults() -> set[str]:
    return {name for name, spec in registry.load().items() if spec.default_enabled}


def render(node: Path) -> str:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(), [])
    args = parser.parse_args(["exporter", f"--sim.node-root={node}"])
    scraper = cli.build_scraper(cli.config_from_args(args), args._specs)
    try:
        scraper.render()  # the first scrape discovers devices; count a steady one
        return scraper.render()
    finally:
        scraper.close()


def test_default_collectors_are_the_budgeted_set():
    assert defaults() == BUDGETED_DEFAULTS


@pytest.mark.integration
def test_series_within_budget_and_every_family_in_catalog(node: Path):
    families = list(parse_text(render(node)))
    samples = [s for f in families for s in f.samples]
    assert 0 < len(samples) <= SERIES_BUDGET
    for family in families:
        metric = CATALOG.get(family.name) or CATALOG.get(family.name + "_total")  # the parser strips _total
        assert metric is not None, f"{family.name} is not in exporters.catalog"
        for sample in family.samples:
            assert sample.name == metric.name
            assert tuple(sample.labels) == metric.labels, sample  # all labels, in catalog order
    prefixes = {s.name.split("_")[1] for s in samples}
    assert {"gpu", "ib", "roce", "pfc", "storage", "nfs", "disk"} <= prefixes  # every collector contributed
    gpus = {s.labels["gpu"] for s in samples if s.name == "lockstep_gpu_info"}
    assert gpus == {str(i) for i in range(8)}


@pytest.mark.integration
def test_real_process_every_default_collector_succeeds(node: Path, stack):
    from lockstep.stack import start_on_port
    service = stack.add(start_on_port("lockstep", lambda port: [
        sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
        f"--sim.node-root={node}"], node.parent.parent / "exporter", ready_path="/metrics"))
    request = urllib.request.Request(service.url + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        text = gzip.decompress(response.read()).decode()
    success = {s.labels["collector"]: s.value for f in parse_text(text) for s in f.samples
               if s.name == "lockstep_scrape_collector_success"}
    assert success == {name: 1.0 for name in defaults()}
    request = urllib.request.Request(service.url + "/metrics",
                                     headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers.get("Content-Encoding") is None
        names = {f.name for f in parse_openmetrics(response.read().decode())}
    assert "lockstep_ib_port_transmit_bytes" in names  # OpenMetrics counter family, _total suffix dropped


def test_encoder_reuses_a_line_only_for_an_equal_value():
    """The encoder caches each series' last value and line (most of a node's series repeat); a changed
    value, NaN (never equal to itself) and int/float twins must still print what format_value prints."""
    from lockstep.exporters.catalog import health
    from lockstep.exporters.toolkit.exposition import Encoder, format_value
    from lockstep.exporters.toolkit.sample import Sample

    encoder, metric = Encoder(), health.SCRAPE_COLLECTOR_DURATION
    for value in (1.0, 1.0, 1, 2.5, 2.5, float("nan"), float("nan"), -0.0, 0, float("inf"), 1e15, 1e15, 3):
        families: dict = {}
        encoder.add(families, [Sample(metric, ("gpu",), value), Sample(metric, ("pfc",), 7.0)])
        assert families[metric] == [f'{metric.name}{{collector="gpu"}} {format_value(value)}',
                                    f'{metric.name}{{collector="pfc"}} 7']
    families = {}
    with pytest.raises(ValueError):
        encoder.add(families, [Sample(metric, ("gpu",), 1.0), Sample(metric, (), 1.0)])
    assert families == {}  # a malformed sample adds nothing of that batch
