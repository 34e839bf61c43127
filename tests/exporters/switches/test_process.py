"""``lockstep fabric-exporter`` as a user runs it, with fake ibnetdiscover/perfquery scripts that print the
real recorded outputs (tests/helpers/fake_ibdiag.py): a hanging switch is killed at its deadline and
loses its own counters alone; a host without InfiniBand logs it once."""
from __future__ import annotations

import shutil
import sys
import urllib.request

import pytest

from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, value
from tests.helpers.stalled import REPO, Process, until

pytestmark = pytest.mark.integration
FAKE = REPO / "tests/helpers/fake_ibdiag.py"
SWITCH, HCA = "0x7cfe9003009ce5b0", "0x7cfe9003003b4bde"


def recorded(tmp_path):
    folder = tmp_path / "fabric"
    (folder / "perfquery").mkdir(parents=True)
    shutil.copy(FIXTURES / "infiniband-diags/treydock/ibnetdiscover/test.out", folder / "ibnetdiscover.out")
    for out in (FIXTURES / "infiniband-diags/treydock/perfquery").iterdir():
        shutil.copy(out, folder / "perfquery" / out.name)
    return folder


def start(tmp_path, folder, *flags):
    tool = f"{sys.executable} {FAKE}"
    return Process(["fabric-exporter", f"--ibnetdiscover.command={tool} ibnetdiscover {folder}",
                    f"--perfquery.command={tool} perfquery {folder}", "--sweep.interval=1", "--sweep.node-timeout=5",
                    *flags], tmp_path / "fabric.log")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return parse(answer.read().decode())


def node_up(metrics, guid, kind, name):
    return metrics[("lockstep_fabric_node_up", (("guid", guid), ("kind", kind), ("name", name)))]


def test_a_hanging_switch_is_cut_at_its_deadline_and_blanks_nothing_else(tmp_path):
    folder = recorded(tmp_path)
    (folder / "hang").mkdir()
    (folder / "hang" / SWITCH).touch()
    process = start(tmp_path, folder)
    try:
        until(lambda: value(scrape(process.port), "lockstep_fabric_sweeps_total", result="complete") >= 2, 60,
              "two complete sweeps")
        metrics = scrape(process.port)
        assert node_up(metrics, SWITCH, "switch", "ib-i1l1s01") == 0
        assert node_up(metrics, HCA, "ca", "o0001 HCA-1") == 1
        assert value(metrics, "lockstep_fabric_node_query_failures_total", guid=SWITCH, reason="timeout") >= 1
        assert value(metrics, "lockstep_fabric_port_receive_bytes_total", guid=HCA, port="1") == 9752484588300 * 4
        assert value(metrics, "lockstep_link_health", guid=HCA, port="1", state="ok") == 1
        assert value(metrics, "lockstep_fabric_sweep_duration_seconds") > 0
        failed = [line for line in process.text().splitlines() if "fabric node query failed" in line]
        assert len([line for line in failed if f"guid={SWITCH}" in line]) == 1   # once per outage, not per sweep
        assert "reason=timeout" in next(line for line in failed if f"guid={SWITCH}" in line)
    finally:
        process.stop()


def test_a_host_without_infiniband_says_so_once(tmp_path):
    folder = recorded(tmp_path)
    (folder / "no-ib").touch()
    process = start(tmp_path, folder)
    try:
        until(lambda: value(scrape(process.port), "lockstep_fabric_sweeps_total", result="no_infiniband") >= 3, 60,
              "three sweeps")
        assert value(scrape(process.port), "lockstep_fabric_infiniband_present") == 0
        assert process.text().count("no usable InfiniBand port") == 1
        assert "level=error" not in process.text()
    finally:
        process.stop()
