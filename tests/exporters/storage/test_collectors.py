"""Storage collectors: golden exposition on the real fixture trees, lctl as a real subprocess,
failures staying inside the collector."""
from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters import cli, registry
from lockstep.exporters.collectors import lustre
from lockstep.exporters.collectors.nfs import NfsCollector, NfsOptions
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import FIXTURES

PROC = FIXTURES / "procfs"
# /host/proc/self in the DaemonSet: host mounts under /host/root, the container's own beside them
CONTAINER_PROC = FIXTURES / "procfs-rootfs"
LCTL_DUMP = FIXTURES / "lustre/lctl-2.14/llite_client.txt"
# lctl that cannot be killed: the first run leaves a process holding stdout ($4: its pid), later
# runs print the dump. "wrapper": the holder is a grandchild outside the killed process group.
STUCK_LCTL = """
echo start >> "$1"
[ "$(wc -l < "$1")" -gt 1 ] && exec cat "$2"
if [ "$3" = wrapper ]; then setsid sleep 600 & echo $! > "$4"; else echo $$ > "$4"; fi
exec sleep 600
"""


def config(procfs: Path = PROC, sysfs: Path = Path("/nonexistent-sys"), rootfs: Path = Path("/"),
           **flags) -> ExporterConfig:
    return ExporterConfig(procfs=procfs, sysfs=sysfs, rootfs=rootfs, flags=MappingProxyType(flags))


def build(name: str, cfg: ExporterConfig):
    return registry.load()[name].factory(cfg)


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


@pytest.mark.parametrize("name", ["lustre", "nfs", "disk"])
def test_golden_on_fixture_procfs(name, golden):
    golden(f"storage/{name}.prom", render(build(name, config())))


@pytest.mark.integration
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


def test_nfs_in_a_container_reports_the_host_mounts_as_the_host_names_them():
    in_container = render(build("nfs", config(CONTAINER_PROC, rootfs=Path("/host/root"))))
    # the same series as on bare metal: /host/root/mnt/nfs/test is the host's /mnt/nfs/test, and
    # the container's own mount of the export on /data is not the host's
    assert in_container == render(build("nfs", config()))
    unfiltered = render(build("nfs", config(CONTAINER_PROC)))
    assert 'mount="/host/root/mnt/nfs/test"' in unfiltered and 'mount="/data"' in unfiltered


def test_lustre_in_a_container_labels_the_host_mount_point(tmp_path):
    shutil.copytree(PROC / "fs", tmp_path / "fs")
    (tmp_path / "self").mkdir()
    shutil.copy(CONTAINER_PROC / "self/mounts", tmp_path / "self/mounts")
    in_container = render(build("lustre", config(tmp_path, rootfs=Path("/host/root"))))
    assert in_container == render(build("lustre", config()))
    # rootfs /: lustrefs is mounted twice (/host/root/lustre, /data/lustre), so no mount point is
    # unique and the instance name stands in
    assert 'mount="lustrefs-ffff88105db50000"' in render(build("lustre", config(tmp_path)))


def test_rootfs_flag_reaches_the_collectors():
    cfg = exporter_config(f"--path.procfs={CONTAINER_PROC}", "--path.rootfs=/host/root/")
    assert cfg.rootfs == Path("/host/root")
    assert render(cli.build_collectors(cfg, registry.load())["nfs"]) == render(build("nfs", config()))
    assert exporter_config().rootfs == Path("/")
    with pytest.raises(ValueError, match="--path.rootfs must be an absolute path"):
        exporter_config("--path.rootfs=host/root")


@pytest.mark.integration
def test_lctl_timeout_and_failure_fail_only_the_lustre_collector():
    slow = build("lustre", config(**{"lustre.lctl-command": "sleep 30", "lustre.lctl-timeout": 0.2}))
    failing = build("lustre", config(**{"lustre.lctl-command": "false"}))
    scraper = Scraper({"lustre": slow, "lustre_failing": failing, "disk": build("disk", config())})
    text = scraper.render()
    assert 'lockstep_scrape_collector_success{collector="lustre"} 0' in text
    assert 'lockstep_scrape_collector_success{collector="lustre_failing"} 0' in text
    assert 'lockstep_scrape_collector_success{collector="disk"} 1' in text
    assert 'lockstep_disk_read_bytes_total{device="nvme0n1"} 2377714176' in text


def kill_and_wait(pid: int) -> None:
    pidfd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        select.select([pidfd], [], [], 60)  # readable once the process has exited
    finally:
        os.close(pidfd)


@pytest.mark.integration
@pytest.mark.parametrize("case", ["wrapper", "unkillable"])
def test_an_lctl_that_outlives_its_kill_is_reported_and_not_started_again(case, tmp_path, monkeypatch):
    if case == "unkillable":
        # SIGKILL stays pending on a process in D state (a Lustre server down): a kill that does
        # nothing looks the same to the collector.
        monkeypatch.setattr(lustre.os, "killpg", lambda pid, sig: None)
    (tmp_path / "lctl.sh").write_text(STUCK_LCTL)
    starts, holder = tmp_path / "starts", tmp_path / "holder.pid"
    cmd = shlex.join(["sh", str(tmp_path / "lctl.sh"), str(starts), str(LCTL_DUMP), case, str(holder)])
    collector = build("lustre", config(**{"lustre.lctl-command": cmd, "lustre.lctl-timeout": 1}))
    try:
        stuck = f"timed out after 1 s and had not exited {lustre.KILL_GRACE_S:g} s after SIGKILL"
        with pytest.raises(RuntimeError, match=stuck):
            list(collector.collect())
        for _ in range(3):  # a scrape while it is still there neither waits nor starts another
            with pytest.raises(RuntimeError, match="has not exited yet; not starting another"):
                list(collector.collect())
        assert starts.read_text() == "start\n"
    finally:
        kill_and_wait(int(holder.read_text()))
    # once it is gone, the next scrape reaps it and runs lctl again
    assert 'fsname="ai400x2",op="mkdir"} 17987059' in render(collector)
    assert starts.read_text() == "start\nstart\n"


def test_missing_sources_yield_nothing(tmp_path):
    for name in ("lustre", "nfs", "disk"):
        assert list(build(name, config(tmp_path, tmp_path)).collect()) == []


def test_a_mount_point_that_is_not_utf8_does_not_fail_the_collector(tmp_path):
    (tmp_path / "self").mkdir()
    # The kernel escapes only space, tab, newline and backslash: a Latin-1 name arrives as raw bytes.
    header = "device srv:/x mounted on /mnt/caf\xe9 with fstype nfs4 statvers=1.1\n".encode("latin-1")
    (tmp_path / "self/mountstats").write_bytes(header + b"\tbytes:\t1 2 0 0 0 0 0 0\n")
    text = render(build("nfs", config(tmp_path)))
    assert 'lockstep_storage_read_bytes_total{mount="/mnt/caf\ufffd",fstype="nfs4",fsname="srv:/x"} 1' in text


def test_nfs_mount_stacked_on_itself_gives_one_series_of_the_visible_mount(tmp_path):
    """Before: the same export mounted twice on one path (a second ``mount`` over the first; the lower
    one is hidden but stays in mountstats) gave two series with identical labels. Prometheus keeps
    the first of duplicate series in a scrape, i.e. the hidden mount's flat counters, and drops the
    visible mount's I/O. The last entry is the mount on top, the one paths resolve to."""
    header = "device 10.0.0.20:/export/data mounted on /data with fstype nfs4 statvers=1.1\n"
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountstats").write_text(
        header + "\tbytes:\t10 0 0 0 0 0 0 0\n" + header + "\tbytes:\t999 0 0 0 0 0 0 0\n")
    samples = list(NfsCollector(NfsOptions(tmp_path)).collect())
    keys = [(s.metric.name, s.labels) for s in samples]
    assert len(keys) == len(set(keys)), keys
    read = [s.value for s in samples if s.metric.name == "lockstep_storage_read_bytes_total"]
    assert read == [999.0]


def test_disk_device_regex_flag():
    text = render(build("disk", config(**{"disk.device-include": "^nvme"})))
    assert 'device="nvme0n1p1"' in text and 'device="sda"' not in text
    with pytest.raises(ValueError, match="disk.device-include"):
        build("disk", config(**{"disk.device-include": "("}))
    with pytest.raises(ValueError, match="lctl-timeout"):
        build("lustre", config(**{"lustre.lctl-timeout": 0}))
