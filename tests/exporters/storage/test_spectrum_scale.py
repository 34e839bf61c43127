"""Spectrum Scale client: mmpmon ``fs_io_s`` answers captured on real clients parsed (values read off the files by
hand), the published ``mmdiag --waiters -Y`` answer parsed (counts and ages read off the file by hand), and the
``spectrum-scale`` collector running real commands: mount points from the mount table, a hung, failing or
garbage-answering mmpmon failing this collector alone, a hung or failing mmdiag losing the waiters alone and
the other way round."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters.collectors.spectrum_scale import SpectrumScaleCollector, SpectrumScaleOptions
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.storage.mmdiag import Waiter, parse_waiters, reason_class
from lockstep.exporters.storage.mmpmon import FsIo, parse_fs_io_s
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.paths import FIXTURES

SCALE = FIXTURES / "spectrum-scale"


def test_fs_io_s_of_two_file_systems():
    assert parse_fs_io_s((SCALE / "mmpmon-fs_io_s-osc.txt").read_text()) == [
        FsIo("gpfs.domain", "scratch", 205607400434, 74839282351, 2377656, 2201576, 59420404, 18874626, 40971, 544768),
        FsIo("gpfs.domain", "project", 0, 0, 513, 513, 0, 0, 0, 169)]
    (gpfs0,) = parse_fs_io_s((SCALE / "mmpmon-fs_io_s-pcp.txt").read_text())
    assert (gpfs0.fsname, gpfs0.read_bytes, gpfs0.writes) == ("gpfs0", 3592793024, 176495)


def test_a_failed_or_corrupt_line_loses_that_file_system_alone():
    lines = (SCALE / "mmpmon-fs_io_s-osc.txt").read_text().splitlines()
    text = "\n".join([lines[0].replace("_rc_ 0", "_rc_ 1"), lines[1], lines[1].replace("_fs_ project", "_fs_ home")
                      .replace("_br_ 0", "_br_ \u0663"), lines[1].replace("_fs_ project", "_fs_ work").replace(" _iu_ 169", ""),
                      "mmpmon> ", "_io_s_ _n_ 10.22.0.106 _rc_ 0"])
    errors: list[str] = []
    assert [fs.fsname for fs in parse_fs_io_s(text, errors)] == ["project"]
    assert [e.split(":")[0] for e in errors] == ["scratch", "home", "work"]


WAITERS = SCALE / "mmdiag-waiters-gpfs_exporter.txt"


def test_waiters_of_the_published_answer():
    errors: list[str] = []
    waiters = parse_waiters(WAITERS.read_text(), errors)
    assert len(waiters) == 27   # 28 records, one with wait time "foo"; the lines after it are no waiters records
    assert errors == ["line 29: wait time 'foo'"]
    assert waiters[0] == Waiter("FsckClientReaperThread", 6861.7395, "reason 'Waiting to reap fsck pointer")
    assert waiters[1] == Waiter("EventsExporterSenderThread", 44.3, "for poll on sock 1379")
    assert waiters[2] == Waiter("RebuildWorkThread", 64.3, "for I/O completion")
    assert waiters[15] == Waiter("RebuildWorkThread", 0.0890, "waiting for PG drain")   # condVarReason
    assert waiters[-1] == Waiter("NSDThread", 0.0037, "for I/O completion")
    assert [reason_class(w.reason) for w in waiters[:3]] == ["other", "network", "io"]
    assert sum(reason_class(w.reason) == "io" for w in waiters) == 24


def test_waiter_records_before_a_header_or_of_another_length_are_lost_alone():
    header, first, second = WAITERS.read_text().splitlines()[:3]
    errors: list[str] = []
    text = "\n".join([second, header, first + ":extra", second, "mmdiag:version:0:1:::5.1.2:"])
    assert [w.thread for w in parse_waiters(text, errors)] == ["EventsExporterSenderThread"]
    assert [e.split(":")[0] for e in errors] == ["line 1", "line 3"]
    assert reason_class("") == "none" and reason_class("  ") == "none"


# mmpmon stand-in: answers the fs_io_s request read on stdin with the capture; anything else is an error.
MMPMON = """
import sys, time
request = sys.stdin.read()
mode = sys.argv[2]
if mode == "hang": time.sleep(30)
if mode == "garbage": print("\\x00\\x01 not mmpmon"); sys.exit(0)
if request.strip() != "fs_io_s": sys.exit("unknown request " + request)
sys.stdout.write(open(sys.argv[1]).read())
"""


# mmdiag stand-in: answers --waiters -Y with the capture; other arguments are an error.
MMDIAG = """
import sys, time
mode = sys.argv[2]
if mode == "hang": time.sleep(30)
if sys.argv[3:] != ["--waiters", "-Y"]: sys.exit("mmdiag: unknown arguments " + " ".join(sys.argv[3:]))
sys.stdout.write(open(sys.argv[1]).read())
"""


def collector(tmp_path: Path, mode: str, waiters_mode: str = "ok") -> SpectrumScaleCollector:
    (tmp_path / "mmpmon.py").write_text(MMPMON)
    (tmp_path / "mmdiag.py").write_text(MMDIAG)
    (tmp_path / "self").mkdir(exist_ok=True)
    (tmp_path / "self/mounts").write_text("scratch /fs/scratch gpfs rw,relatime 0 0\n/dev/sda1 / ext4 rw 0 0\n")
    command = shlex.join([sys.executable, str(tmp_path / "mmpmon.py"), str(SCALE / "mmpmon-fs_io_s-osc.txt"), mode])
    args = ["--waiters", "-Y"] if waiters_mode != "fail" else ["--bogus"]
    mmdiag = shlex.join([sys.executable, str(tmp_path / "mmdiag.py"), str(WAITERS), waiters_mode, *args])
    flags = {"spectrum-scale.mmpmon-command": command, "spectrum-scale.timeout": 1.0,
             "spectrum-scale.mmdiag-command": mmdiag}
    return SpectrumScaleCollector(SpectrumScaleOptions.from_config(ExporterConfig(procfs=tmp_path,
                                                                                  flags=MappingProxyType(flags))))


@pytest.mark.integration
def test_golden_exposition_through_a_real_command(tmp_path, golden):
    families: dict = {}
    Encoder().add(families, collector(tmp_path, "ok").collect())
    text = render_text(families)
    golden("storage/spectrum_scale.prom", text)
    assert 'lockstep_storage_read_bytes_total{mount="/fs/scratch",fstype="gpfs",fsname="scratch"} 205607400434' in text
    # no mount table entry for project: the file system's name stands in for the mount point
    assert 'lockstep_storage_metadata_ops_total{mount="project",fstype="gpfs",fsname="project",op="inode_update"} 169' in text
    # the published waiters less the two idle-by-design threads: 25, the oldest 64.3 s (read off the file)
    for line in ('lockstep_gpfs_waiters_success 1', 'lockstep_gpfs_waiters{reason="io"} 24',
                 'lockstep_gpfs_waiters{reason="other"} 1', 'lockstep_gpfs_waiters{reason="network"} 0',
                 'lockstep_gpfs_waiters{reason="none"} 0', 'lockstep_gpfs_waiters_older_than{older_than_seconds="0.1"} 12',
                 'lockstep_gpfs_waiters_older_than{older_than_seconds="1"} 3',
                 'lockstep_gpfs_waiters_older_than{older_than_seconds="10"} 3',
                 'lockstep_gpfs_waiters_older_than{older_than_seconds="60"} 1',
                 'lockstep_gpfs_waiters_older_than{older_than_seconds="300"} 0', 'lockstep_gpfs_waiter_oldest_seconds 64.3'):
        assert line + "\n" in text, line


def test_without_exclusions_the_idle_threads_count():
    samples = collector_samples(WAITERS.read_text(), {"spectrum-scale.waiters-exclude": ""})
    assert samples["lockstep_gpfs_waiter_oldest_seconds", ()] == 6861.7395
    assert samples["lockstep_gpfs_waiters", ("network",)] == 1
    assert [samples["lockstep_gpfs_waiters_older_than", (t,)] for t in ("0.1", "1", "10", "60", "300")] == [14, 5, 5, 2, 1]


def collector_samples(text: str, flags: dict) -> dict:
    c = SpectrumScaleCollector(SpectrumScaleOptions.from_config(ExporterConfig(flags=MappingProxyType(flags))))
    return {(s.metric.name, s.labels): s.value for s in c._waiters(text)}


@pytest.mark.integration
@pytest.mark.parametrize("waiters_mode", ["hang", "fail"])
def test_a_hung_or_failing_mmdiag_loses_the_waiters_alone(tmp_path, waiters_mode):
    text = Scraper({"spectrum-scale": collector(tmp_path, "ok", waiters_mode)}).render()
    assert 'lockstep_scrape_collector_success{collector="spectrum-scale"} 0' in text
    assert 'lockstep_gpfs_waiters_success 0' in text
    assert 'lockstep_gpfs_waiters{' not in text and 'lockstep_gpfs_waiter_oldest_seconds' not in text
    assert 'lockstep_storage_read_bytes_total{mount="/fs/scratch",fstype="gpfs",fsname="scratch"} 205607400434' in text


@pytest.mark.integration
def test_a_hung_mmpmon_keeps_the_waiters(tmp_path):
    text = Scraper({"spectrum-scale": collector(tmp_path, "hang")}).render()
    assert 'lockstep_scrape_collector_success{collector="spectrum-scale"} 0' in text
    assert 'lockstep_storage_read_bytes_total' not in text
    assert 'lockstep_gpfs_waiters_success 1' in text and 'lockstep_gpfs_waiter_oldest_seconds 64.3' in text


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["hang", "garbage", "fail"])
def test_a_hung_failing_or_garbage_mmpmon_fails_this_collector_alone(tmp_path, mode):
    bad = collector(tmp_path, mode)
    if mode == "fail":   # the stand-in refuses a request it does not know: feed it none
        bad.mmpmon.stdin = "nonsense\n"
    (tmp_path / "good").mkdir()
    good = collector(tmp_path / "good", "ok")
    text = Scraper({"spectrum-scale": bad, "other": good}).render()
    expected = "1" if mode == "garbage" else "0"   # garbage is no file system, not a failure
    assert f'lockstep_scrape_collector_success{{collector="spectrum-scale"}} {expected}' in text
    assert 'lockstep_scrape_collector_success{collector="other"} 1' in text
    assert 'fsname="scratch"' in text


def test_flags_are_checked():
    for flags, error in (({"spectrum-scale.mmpmon-command": ""}, "empty"),
                         ({"spectrum-scale.timeout": -1}, "timeout"),
                         ({"spectrum-scale.waiters-exclude": "("}, "waiters-exclude"),
                         ({"spectrum-scale.mmdiag-command": "'"}, "mmdiag-command")):
        with pytest.raises(ValueError, match=error):
            SpectrumScaleOptions.from_config(ExporterConfig(flags=MappingProxyType(flags)))


def test_an_empty_mmdiag_command_turns_the_waiters_off():
    options = SpectrumScaleOptions.from_config(ExporterConfig(flags=MappingProxyType({"spectrum-scale.mmdiag-command": ""})))
    assert SpectrumScaleCollector(options).mmdiag is None
