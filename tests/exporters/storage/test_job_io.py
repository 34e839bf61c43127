"""Per-job I/O from cgroup v2: io.stat, io.pressure and mountinfo parsed from the kernel's documented examples
(values read off the fixture files by hand), the job groups found in Slurm's and the kubelet's layouts, and
the ``job-io`` collector's golden exposition with a corrupt or unreadable group losing that group alone."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters.collectors.job_io import JobIoCollector, JobIoOptions, job_groups
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import PartialFailure
from lockstep.exporters.storage.cgroupio import CgroupFormatError, parse_io_stat, parse_pressure
from lockstep.exporters.storage.jobcgroups import JobGroup, kube_pod, slurm_job
from lockstep.exporters.storage.mountinfo import DeviceMount, parse_mountinfo
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.paths import FIXTURES

ROOT = FIXTURES / "cgroup"
SLURM = ROOT / "sys/fs/cgroup/system.slice/slurmstepd.scope"
POD_UID = "0c6e2b0a-54e4-4c4d-9a55-7e3c8d2f1a90"
OTHER_POD = "5f1d8e7a-1111-4a2b-8c3d-aa00bb11cc22"


def test_io_stat_of_the_kernel_documentation():
    sda, sdb = sorted(parse_io_stat((SLURM / "job_4242/io.stat").read_text()), key=lambda d: d.device)
    # 8:0 rbytes=90430464 wbytes=299008000 rios=8950 wios=1252 dbytes=50331648 dios=3021
    assert (sda.device, sda.read_bytes, sda.write_bytes, sda.reads, sda.writes) == ("8:0", 90430464, 299008000, 8950, 1252)
    assert (sda.discard_bytes, sda.discards) == (50331648, 3021)
    assert (sdb.device, sdb.read_bytes, sdb.write_bytes, sdb.reads, sdb.writes) == ("8:16", 1459200, 314773504, 192, 353)


def test_io_stat_of_older_kernels_has_no_discard_counters():
    devices = parse_io_stat((SLURM / "job_4243/io.stat").read_text())
    assert [(d.device, d.discard_bytes, d.discards) for d in devices] == [("8:16", None, None), ("8:0", None, None)]


def test_a_corrupt_io_stat_line_loses_that_device_alone():
    errors: list[str] = []
    text = ("8:16 rbytes=1 wbytes=2 rios=3 wios=4\n8:0 rbytes=\u0663 wbytes=2 rios=3 wios=4\n"
            "259:0 rbytes=5 wios=6\nnvme0n1 rbytes=1\n253:1 rbytes=7 wbytes=8 rios=9 wios=10 cost.vrate=100.00\n")
    assert [d.device for d in parse_io_stat(text, errors)] == ["8:16", "253:1"]
    assert len(errors) == 3 and errors[1] == "259:0: no wbytes, rios"


def test_pressure_totals_are_seconds():
    p = parse_pressure((SLURM / "job_4242/io.pressure").read_text())
    assert (p.some_seconds, p.full_seconds) == (15e-6, 25e-6)  # total=15, total=25 (µs)
    assert parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n").full_seconds is None
    for bad in ("", "full avg10=0.00 total=1\n", "some avg10=0.00 total=-1\n"):
        with pytest.raises(CgroupFormatError):
            parse_pressure(bad)


def test_mountinfo_names_each_device_by_a_mount_of_its_root():
    devices = parse_mountinfo((ROOT / "proc/self/mountinfo").read_text())
    assert devices["8:1"] == DeviceMount("/", "ext4")
    assert devices["8:0"] == DeviceMount("/var/lib/slurm", "ext4")
    # 8:16 is also bind-mounted from a subdirectory at a shorter path's sibling: its root mount wins
    assert devices["8:16"] == DeviceMount("/local scratch", "xfs")
    # proc.rst's example: only a subdirectory of 98:0 is mounted, so that mount names it
    assert devices["98:0"] == DeviceMount("/mnt2", "ext3")
    assert devices["0:42"] == DeviceMount("/mnt/nfs/test", "nfs4")
    in_container = parse_mountinfo("40 21 8:0 / /host/root/data rw - ext4 /dev/sda rw\n"
                                   "41 21 8:0 / /data rw - ext4 /dev/sda rw\n", "/host/root")
    assert in_container == {"8:0": DeviceMount("/data", "ext4")}
    assert parse_mountinfo("40 21 8:0 / /x rw\n12 nonsense\n") == {}


def test_job_group_names():
    assert slurm_job("job_4242") == JobGroup("slurm", "4242")
    assert slurm_job("step_0") is None and slurm_job("job_42x") is None and slurm_job("job_") is None
    assert kube_pod(f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice") == JobGroup("kubernetes", POD_UID)
    assert kube_pod(f"kubepods-pod{POD_UID.replace('-', '_')}.slice") == JobGroup("kubernetes", POD_UID)
    assert kube_pod(f"pod{POD_UID}") == JobGroup("kubernetes", POD_UID)  # the cgroupfs driver
    assert kube_pod("kubepods-burstable.slice") is None and kube_pod("podman.slice") is None


def test_groups_found_in_the_slurm_and_kubelet_layouts():
    found = [(g, os.path.relpath(path, ROOT / "sys/fs/cgroup")) for g, path in job_groups(str(ROOT / "sys/fs/cgroup"))]
    assert found == [
        (JobGroup("slurm", "4242"), "system.slice/slurmstepd.scope/job_4242"),
        (JobGroup("slurm", "4243"), "system.slice/slurmstepd.scope/job_4243"),
        (JobGroup("kubernetes", POD_UID), "kubepods.slice/kubepods-burstable.slice/"
                                          "kubepods-burstable-pod0c6e2b0a_54e4_4c4d_9a55_7e3c8d2f1a90.slice"),
        (JobGroup("kubernetes", OTHER_POD), "kubepods.slice/kubepods-burstable.slice/"
                                            "kubepods-burstable-pod5f1d8e7a_1111_4a2b_8c3d_aa00bb11cc22.slice"),
    ]


def collector(root: Path = ROOT, pod_jobs=lambda: {POD_UID: "ml/llama-7b"}, **flags) -> JobIoCollector:
    config = ExporterConfig(procfs=root / "proc", sysfs=root / "sys", flags=MappingProxyType(flags))
    return JobIoCollector(JobIoOptions.from_config(config), pod_jobs)


def render(samples) -> str:
    families: dict = {}
    Encoder().add(families, samples)
    return render_text(families)


def test_golden_exposition(golden):
    text = render(collector().collect())
    golden("storage/job_io.prom", text)
    assert ('lockstep_job_io_read_bytes_total{job_id="4242",scheduler="slurm",pod_uid="",device="8:0",'
            'mount="/var/lib/slurm",fstype="ext4"} 90430464') in text
    assert ('lockstep_job_io_write_bytes_total{job_id="ml/llama-7b",scheduler="kubernetes",pod_uid="'
            + POD_UID + '",device="8:16",mount="/local scratch",fstype="xfs"} 314773504') in text
    assert 'lockstep_job_io_pressure_stalled_seconds_total{job_id="4242",scheduler="slurm",pod_uid="",kind="full"}' in text
    assert 'job_id="4243",scheduler="slurm",pod_uid="",kind=' not in text   # no io.pressure: absent, not 0
    assert OTHER_POD not in text   # holds no GPU


def test_all_pods_flag_reports_pods_without_a_job():
    text = render(collector(**{"job-io.all-pods": True}).collect())
    assert f'job_id="",scheduler="kubernetes",pod_uid="{OTHER_POD}",device="8:0"' in text


def test_a_job_mapping_that_fails_keeps_the_slurm_groups_and_says_so():
    def broken():
        raise RuntimeError("kubelet socket refused")
    with pytest.raises(PartialFailure, match="kubelet socket refused") as caught:
        collector(pod_jobs=broken).collect()
    jobs = {s.labels[0] for s in caught.value.samples}
    assert jobs == {"4242", "4243"}


def test_a_corrupt_or_unreadable_group_loses_that_group_alone(tmp_path):
    shutil.copytree(ROOT, tmp_path, dirs_exist_ok=True)
    scope = tmp_path / "sys/fs/cgroup/system.slice/slurmstepd.scope"
    (scope / "job_4242/io.stat").write_text("8:0 rbytes=\u00b2 wbytes=1 rios=1 wios=1\n8:16 rbytes=1 wbytes=1 rios=1 wios=1\n")
    (scope / "job_4242/io.pressure").write_text("garbage\n")
    (scope / "job_4243/io.stat").unlink()
    (scope / "job_4243/io.stat").mkdir()          # unreadable as a file: EISDIR
    (tmp_path / "proc/self/mountinfo").unlink()    # devices stay unnamed, counted all the same
    text = render(collector(tmp_path).collect())
    assert 'job_id="4242",scheduler="slurm",pod_uid="",device="8:16",mount="",fstype=""} 1' in text
    assert 'job_id="4242",scheduler="slurm",pod_uid="",device="8:0"' not in text
    assert 'lockstep_job_io_pressure_stalled_seconds_total{job_id="4242"' not in text
    assert 'job_id="4243"' not in text
    assert f'pod_uid="{POD_UID}",device="8:0",mount="",fstype=""}} 90430464' in text


def test_a_node_without_job_groups_reports_nothing_and_asks_no_mapping(tmp_path):
    def unused():
        raise AssertionError("no pod group: the job mapping is not opened")
    assert collector(tmp_path, pod_jobs=unused).collect() == []


def test_the_job_mapping_is_asked_at_most_once_per_interval():
    calls = []
    c = collector(pod_jobs=lambda: calls.append(1) or {POD_UID: "ml/llama-7b"})
    c.collect()
    c.collect()
    assert calls == [1]
