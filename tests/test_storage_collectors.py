"""Storage collectors: golden exposition on the real fixture trees, lctl as a real subprocess,
failures staying inside the collector."""
from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from conftest import FIXTURES
from exporters import registry
from exporters.config import ExporterConfig
from exporters.exposition import Encoder, render_text
from exporters.scrape import Scraper

PROC = FIXTURES / "procfs"
LCTL_DUMP = FIXTURES / "lustre/lctl-2.14/llite_client.txt"


def config(procfs: Path = PROC, sysfs: Path = Path("/nonexistent-sys"), **flags) -> ExporterConfig:
    return ExporterConfig(procfs=procfs, sysfs=sysfs, flags=MappingProxyType(flags))


def build(name: str, cfg: ExporterConfig):
    return registry.load()[name].factory(cfg)


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


@pytest.mark.parametrize("name", ["lustre", "nfs", "disk"])
def test_golden_on_fixture_procfs(name, golden):
    golden(f"storage/{name}.prom", render(build(name, config())))


def test_lustre_from_lctl_command_output(golden):
    cmd = shlex.join([sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())",
                      str(LCTL_DUMP)])
    text = render(build("lustre", config(**{"lustre.lctl-command": cmd})))
    golden("storage/lustre_lctl.prom", text)
    # no mount table entry for ai400x2 in the fixture: the instance name stands in for the mount point
    assert 'mount="ai400x2-ff47bce9ca35d800",fstype="lustre",fsname="ai400x2",op="mkdir"} 17987059' in text
    assert "lockstep_storage_read_bytes_total" not in text  # absent in the dump, not reported as 0


def test_lustre_debugfs_layout(tmp_path):
    stats = tmp_path / "sys/kernel/debug/lustre/llite/lustrefs-ffff88105db50000/stats"
    stats.parent.mkdir(parents=True)
    shutil.copy(PROC / "fs/lustre/llite/lustrefs-ffff88105db50000/stats", stats)
    (tmp_path / "proc/self").mkdir(parents=True)
    shutil.copy(PROC / "self/mounts", tmp_path / "proc/self/mounts")
    text = render(build("lustre", config(tmp_path / "proc", tmp_path / "sys")))
    assert ('lockstep_storage_write_bytes_total{mount="/lustre",fstype="lustre",fsname="lustrefs"} '
            '93813797294080') in text


def test_lctl_timeout_and_failure_fail_only_the_lustre_collector():
    slow = build("lustre", config(**{"lustre.lctl-command": "sleep 30", "lustre.lctl-timeout": 0.2}))
    failing = build("lustre", config(**{"lustre.lctl-command": "false"}))
    scraper = Scraper({"lustre": slow, "lustre_failing": failing, "disk": build("disk", config())})
    text = scraper.render()
    assert 'lockstep_scrape_collector_success{collector="lustre"} 0' in text
    assert 'lockstep_scrape_collector_success{collector="lustre_failing"} 0' in text
    assert 'lockstep_scrape_collector_success{collector="disk"} 1' in text
    assert 'lockstep_disk_read_bytes_total{device="nvme0n1"} 2377714176' in text


def test_missing_sources_yield_nothing(tmp_path):
    for name in ("lustre", "nfs", "disk"):
        assert list(build(name, config(tmp_path, tmp_path)).collect()) == []


def test_disk_device_regex_flag():
    text = render(build("disk", config(**{"disk.device-include": "^nvme"})))
    assert 'device="nvme0n1p1"' in text and 'device="sda"' not in text
    with pytest.raises(ValueError, match="disk.device-include"):
        build("disk", config(**{"disk.device-include": "("}))
    with pytest.raises(ValueError, match="lctl-timeout"):
        build("lustre", config(**{"lustre.lctl-timeout": 0}))
