"""``pfc`` collector: the directory source on ``ethtool -S`` files, flags, and the ioctl source for real
on a veth pair in a network namespace of the test's own."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lockstep.exporters.collectors.pfc import PfcCollector, PfcOptions, make_ethtool
from lockstep.exporters.fabric.ethtool import DirEthtool
from lockstep.exporters.toolkit import logs
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.exporter_args import exporter_config
from tests.helpers.needs import platform_lacks
from tests.helpers.paths import FIXTURES, REPO

ETHTOOL = FIXTURES / "ethtool"


def collector(root: Path, regex: str | None = None) -> PfcCollector:
    import re
    options = PfcOptions(root, re.compile(regex) if regex else None, Path("/nonexistent"))
    return PfcCollector(make_ethtool(options), options)


def render(c: PfcCollector) -> str:
    families: dict = {}
    Encoder().add(families, c.collect())
    return render_text(families)


def series(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_golden_dir_source(golden):
    golden("fabric/pfc_node.prom", render(collector(ETHTOOL / "node")))


def test_driver_table_and_units():
    got = series(render(collector(ETHTOOL / "node")))
    # mlx5 pause duration is in microseconds
    assert got['lockstep_pfc_pause_duration_seconds_total{interface="ens1np0",priority="3",direction="tx"}'] == 2.914772
    # no driver file: mlx5 recognised from its counter names
    assert got['lockstep_pfc_pause_frames_total{interface="ens2np0",priority="4",direction="rx"}'] == 1
    assert got['lockstep_pfc_pause_frames_total{interface="ens3f0np0",priority="3",direction="rx"}'] == 321  # bnxt
    assert got['lockstep_pfc_pause_frames_total{interface="ens4f0",priority="3",direction="tx"}'] == 88  # ice
    assert got['lockstep_pfc_pause_storm_events_total{interface="ens1np0",level="warning"}'] == 2
    # priorities without PFC enabled have no counters: absent, not zero
    assert not any('priority="5"' in key for key in got)


def test_the_reader_leaves_a_missing_driver_unknown_and_the_pfc_source_names_it():
    """The general reader knows nothing of PFC: the collector's source names the driver from its table."""
    assert DirEthtool(ETHTOOL / "node").stats("ens2np0").driver is None
    assert collector(ETHTOOL / "node").ethtool.stats("ens2np0").driver == "mlx5_core"
    assert collector(ETHTOOL / "node").ethtool.stats("veth7").driver == "veth"  # the driver file first


def test_unknown_driver_skipped_with_one_debug_line(caplog, tmp_path):
    name = f"veth{uuid.uuid4().hex[:6]}"  # log-once keys live for the process: a name no other test used
    shutil.copytree(ETHTOOL / "node" / "veth7", tmp_path / name)
    shutil.copytree(ETHTOOL / "node" / "ens1np0", tmp_path / "ens1np0")
    c = collector(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="lockstep.collector.pfc"):
        render(c)
        text = render(c)
    assert name not in text and "ens1np0" in text
    lines = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert lines == [f"no PFC counter table for driver veth; interface {name} skipped"]


def test_malformed_file_loses_only_that_interface(caplog):
    with caplog.at_level(logging.WARNING, logger="lockstep.collector.pfc"):
        got = series(render(collector(ETHTOOL / "malformed")))
    assert got and all('interface="ens2np0"' in key for key in got)
    assert any("ens1np0/statistics: line 3" in r.getMessage() for r in caplog.records)


def test_interface_regex():
    got = series(render(collector(ETHTOOL / "node", r"ens[34].*")))
    assert {key.split('interface="')[1].split('"')[0] for key in got} == {"ens3f0np0", "ens4f0"}


def test_simulated_file_replaced_between_scrapes(tmp_path):
    root = tmp_path / "ethtool"
    shutil.copytree(ETHTOOL / "node" / "ens1np0", root / "ens1np0")
    c = collector(root)
    key = 'lockstep_pfc_pause_frames_total{interface="ens1np0",priority="3",direction="rx"}'
    assert series(render(c))[key] == 41927
    stats = root / "ens1np0" / "statistics"
    tmp = root / "ens1np0" / ".statistics.tmp"
    tmp.write_text(stats.read_text().replace("rx_prio3_pause: 41927", "rx_prio3_pause: 50000"))
    os.replace(tmp, stats)
    assert series(render(c))[key] == 50000


def test_flags(tmp_path):
    (tmp_path / "node03" / "ethtool").mkdir(parents=True)
    assert PfcOptions.from_config(exporter_config(f"--sim.node-root={tmp_path / 'node03'}")).source == \
        tmp_path / "node03" / "ethtool"
    assert PfcOptions.from_config(exporter_config()).source == "ioctl"
    options = PfcOptions.from_config(exporter_config(f"--pfc.source=dir:{ETHTOOL / 'node'}", "--pfc.interfaces=ens1.*"))
    assert options.source == ETHTOOL / "node" and options.interfaces.pattern == "ens1.*"
    for bad in ("--pfc.source=ethtool", "--pfc.interfaces=ens(("):
        with pytest.raises(ValueError, match="--pfc"):
            PfcOptions.from_config(exporter_config(bad))


# --- the ioctl source, for real -------------------------------------------------------------------

IOCTL_SCRIPT = """
import json, sys
from lockstep.exporters.fabric.ethtool_ioctl import IoctlEthtool
e = IoctlEthtool()
out = {}
for name in sys.argv[1:]:
    s = e.stats(name)
    out[name] = None if s is None else {"driver": s.driver, "names": list(s.names), "values": list(s.values)}
out["_interfaces"] = e.interfaces()
print(json.dumps(out))
"""


def ethtool_s(netns: str, interface: str) -> dict[str, int]:
    """``ethtool -S`` parsed here, independently of lockstep's parser."""
    text = subprocess.run(["ip", "netns", "exec", netns, "ethtool", "-S", interface], check=True,
                          capture_output=True, text=True, timeout=30).stdout
    pairs = [line.strip().rsplit(":", 1) for line in text.splitlines()[1:] if line.strip()]
    return {name.strip(): int(value) for name, value in pairs}


@pytest.mark.integration
def test_ioctl_matches_ethtool_s_on_veth(netns):
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", IOCTL_SCRIPT, "lsa0", "lsb0", "lo",
                           "nosuch0"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["_interfaces"] == ["lo", "lsa0", "lsb0"]  # the namespace's own interfaces, nothing else
    for interface in ("lsa0", "lsb0"):
        ours = got[interface]
        assert ours["driver"] == "veth"
        assert dict(zip(ours["names"], ours["values"])) == ethtool_s(netns, interface)
        assert len(ours["names"]) == len(set(ours["names"])) > 3
    assert got["lo"] is None and got["nosuch0"] is None  # no driver statistics / no such device


CHANNELS_SCRIPT = """
import json, subprocess
from lockstep.exporters.fabric.ethtool_ioctl import IoctlEthtool
e = IoctlEthtool()
first = e.stats("lsa0")
subprocess.run(["ethtool", "-L", "lsa0", "rx", "2", "tx", "2"], check=True)
second = e.stats("lsa0")
print(json.dumps([list(first.names), dict(zip(second.names, second.values))]))
"""


@pytest.mark.integration
def test_ioctl_rereads_names_when_the_count_changes(netns):
    """Fewer channels, fewer per-queue statistics: the cached names must not be reused."""
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", CHANNELS_SCRIPT],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    if proc.returncode != 0 and "ethtool" in proc.stderr and "Operation not supported" in proc.stderr:
        platform_lacks(f"this kernel's veth cannot change channels: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr
    first, second = json.loads(proc.stdout)
    assert "rx_queue_3_drops" in first and "rx_queue_3_drops" not in second
    assert second == ethtool_s(netns, "lsa0")


COLLECTOR_SCRIPT = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
from lockstep.exporters.collectors.pfc import PfcCollector, PfcOptions
from lockstep.exporters.fabric.ethtool_ioctl import IoctlEthtool
c = PfcCollector(IoctlEthtool(), PfcOptions("ioctl", None, Path(sys.argv[1])))
print(c.selected(), list(c.collect()))
"""


@pytest.mark.integration
def test_ioctl_collector_reads_the_netdevs_behind_rdma_devices(netns, tmp_path):
    net = tmp_path / "sys/class/infiniband/mlx5_0/device/net/lsa0"
    net.mkdir(parents=True)
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", COLLECTOR_SCRIPT,
                           str(tmp_path / "sys")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['lsa0'] []"
    assert "no PFC counter table for driver veth; interface lsa0 skipped" in proc.stderr


def test_dir_source_follows_names_and_values_between_scrapes(tmp_path):
    """The names of the last scrape are reused while the file's names stay the same; a changed name list,
    or a malformed value, is noticed on the very next scrape."""
    shutil.copytree(ETHTOOL / "node" / "ens1np0", tmp_path / "ens1np0")
    stats_file = tmp_path / "ens1np0" / "statistics"
    text = stats_file.read_text()
    source = DirEthtool(tmp_path)
    first = source.stats("ens1np0")
    stats_file.write_text(text.replace("rx_prio3_pause: 41927", "rx_prio3_pause: 50000"))
    second = source.stats("ens1np0")
    assert second.names is first.names
    assert dict(zip(second.names, second.values))["rx_prio3_pause"] == 50000
    stats_file.write_text(text.replace("rx_prio3_pause: 41927", "rx_prio3_pause: 5x"))
    with pytest.raises(ValueError, match="rx_prio3_pause: 5x"):
        source.stats("ens1np0")
    stats_file.write_text(text.replace("rx_prio3_pause:", "rx_prio3_pause_renamed:"))
    third = source.stats("ens1np0")
    assert "rx_prio3_pause_renamed" in third.names and "rx_prio3_pause" not in third.names


def test_interface_directory_without_statistics_has_none(tmp_path):
    shutil.copytree(ETHTOOL / "node" / "ens1np0", tmp_path / "ens1np0")
    (tmp_path / "ens9np0").mkdir()
    c = collector(tmp_path)
    assert c.ethtool.stats("ens9np0") is None
    assert {key.split('interface="')[1].split('"')[0] for key in series(render(c))} == {"ens1np0"}


def test_pfc_log_once_keys_do_not_grow_with_changing_error_text(tmp_path, caplog):
    """Before: the log-once key held the exception text, which names the bad line's content, so a file
    that keeps being malformed differently (a counter value changing every scrape) added a key, and
    logged a warning, on every scrape: unbounded memory, no rate limit."""
    name = f"ens{uuid.uuid4().hex[:6]}"  # log-once keys live for the process: a name no other test used
    (tmp_path / name).mkdir()
    statistics = tmp_path / name / "statistics"
    c = collector(tmp_path, ".*")
    before = len(logs._once)
    with caplog.at_level(logging.WARNING, logger="lockstep.collector.pfc"):
        for scrape in range(20):
            statistics.write_text(f"NIC statistics:\n     rx_prio3_pause: {scrape}x\n")
            assert c.collect() == []
    assert len(logs._once) - before <= 1
    assert len([r for r in caplog.records if name in r.getMessage()]) == 1
    c.close()


def test_pfc_state_of_vanished_interfaces_is_dropped(tmp_path):
    """Before: the pfc collector (plans, label tuples) and its statistics source (drivers, paths) kept
    an entry per interface name ever seen, so interface churn (SR-IOV VFs created and renamed, veths
    matched by --pfc.interfaces) grew memory without bound; each plan holds the driver's whole
    statistics name list (~1,000 names for mlx5)."""
    source = ETHTOOL / "node" / "ens1np0"
    c = collector(tmp_path, "vf.*")
    ethtool = c.ethtool
    for n in range(12):
        shutil.copytree(source, tmp_path / f"vf{n}")
        assert {s.labels[0] for s in c.collect()} == {f"vf{n}"}
        shutil.rmtree(tmp_path / f"vf{n}")
    assert c.collect() == []
    assert (len(c._plans), len(c._labels)) == (0, 0)
    assert (len(ethtool._drivers), len(ethtool._paths)) == (0, 0)
    c.close()
