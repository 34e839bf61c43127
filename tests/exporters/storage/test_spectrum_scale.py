"""Spectrum Scale client: mmpmon ``fs_io_s`` answers captured on real clients parsed (values read off the files by
hand), and the ``spectrum-scale`` collector running a real command with the request on its stdin: mount points
from the mount table, a hung, failing or garbage-answering mmpmon failing this collector alone."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters.collectors.spectrum_scale import SpectrumScaleCollector, SpectrumScaleOptions
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
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


def collector(tmp_path: Path, mode: str) -> SpectrumScaleCollector:
    (tmp_path / "mmpmon.py").write_text(MMPMON)
    (tmp_path / "self").mkdir(exist_ok=True)
    (tmp_path / "self/mounts").write_text("scratch /fs/scratch gpfs rw,relatime 0 0\n/dev/sda1 / ext4 rw 0 0\n")
    command = shlex.join([sys.executable, str(tmp_path / "mmpmon.py"), str(SCALE / "mmpmon-fs_io_s-osc.txt"), mode])
    flags = {"spectrum-scale.mmpmon-command": command, "spectrum-scale.timeout": 1.0}
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
                         ({"spectrum-scale.timeout": -1}, "timeout")):
        with pytest.raises(ValueError, match=error):
            SpectrumScaleOptions.from_config(ExporterConfig(flags=MappingProxyType(flags)))
