"""Local NVMe health: the SMART log parsed from smartctl's captured JSON and from nvme-cli's JSON shape (values
read off the files by hand; both describe the same Samsung drive), and the ``nvme`` collector reading identity
from a sysfs tree and health through a real command, one failing, hanging or garbage-answering controller
losing its own health series alone."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters.collectors.nvme import NvmeCollector, NvmeOptions
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.storage.nvmesmart import NvmeFormatError, parse_smart_log
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.paths import FIXTURES

NVME = FIXTURES / "nvme"


def test_smartctl_capture_of_a_drive_with_media_errors():
    h = parse_smart_log((NVME / "smartctl-smart-nvme-failed.json").read_text())
    assert (h.critical_warning, h.temperature_celsius, h.media_errors) == (0, 35.0, 7)
    assert (h.available_spare_ratio, h.available_spare_threshold_ratio, h.percentage_used_ratio) == (0.99, 0.1, 0.03)
    assert (h.data_units_read, h.data_units_written) == (17176794, 65602088)


def test_nvme_cli_shape_gives_the_same_health_in_celsius():
    smartctl = parse_smart_log((NVME / "smartctl-smart-nvme-failed.json").read_text())
    for name in ("nvme-cli-smart-log.json", "nvme-cli-smart-log-verbose.json"):
        h = parse_smart_log((NVME / name).read_text())
        assert h.temperature_celsius == pytest.approx(34.85)   # 308 K
        assert (h.media_errors, h.percentage_used_ratio, h.available_spare_ratio, h.data_units_written) == \
            (smartctl.media_errors, 0.03, 0.99, 65602088)


def test_critical_warning_bits():
    text = (NVME / "nvme-cli-smart-log.json").read_text().replace('"critical_warning":0', '"critical_warning":5')
    h = parse_smart_log(text)
    assert [h.warning(i) for i in range(6)] == [True, False, True, False, False, False]


@pytest.mark.parametrize("text", ["", "[]", '{"temperature": 300}', '{"avail_spare": "x", "spare_thresh": 1}',
                                  '{"avail_spare": 1, "spare_thresh": 1, "percent_used": -3, "media_errors": 0, '
                                  '"critical_warning": 0}', '{"nvme_smart_health_information_log": {}}'])
def test_what_is_not_a_health_log_is_its_own_error(text):
    with pytest.raises(NvmeFormatError):
        parse_smart_log(text)


def sysfs(tmp_path: Path, controllers: dict[str, str]) -> Path:
    for name, model in controllers.items():
        d = tmp_path / "class/nvme" / name
        d.mkdir(parents=True)
        (d / "model").write_text(model + "  \n")     # sysfs pads the identify strings
        (d / "serial").write_text(f"S{name.upper()}\n")
        (d / "firmware_rev").write_text("2B2QEXE7\n")
    return tmp_path


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def collector(root: Path, **flags) -> NvmeCollector:
    return NvmeCollector(NvmeOptions.from_config(ExporterConfig(sysfs=root, flags=MappingProxyType(flags))))


def test_identity_only_without_a_command(tmp_path):
    text = render(collector(sysfs(tmp_path, {"nvme0": "Samsung SSD 970 EVO 500GB"})))
    assert text.count("\nlockstep_nvme") == 1
    assert ('lockstep_nvme_info{controller="nvme0",model="Samsung SSD 970 EVO 500GB",serial="SNVME0",'
            'firmware="2B2QEXE7"} 1') in text
    assert collector(tmp_path / "none").collect() == []


# The fake tool: prints the fixture for nvme0, garbage for nvme1, fails on nvme2 and hangs on nvme3.
TOOL = """
import sys, time
device = sys.argv[2]
if device.endswith("nvme0"): sys.stdout.write(open(sys.argv[1]).read())
elif device.endswith("nvme1"): print("Segmentation fault")
elif device.endswith("nvme2"): sys.exit("NVMe status: Access Denied")
else: time.sleep(30)
"""


@pytest.mark.integration
def test_health_per_controller_and_a_bad_one_loses_only_its_own(tmp_path, golden):
    root = sysfs(tmp_path, {f"nvme{i}": "Samsung SSD 970 EVO 500GB" for i in range(4)})
    (tmp_path / "tool.py").write_text(TOOL)
    command = shlex.join([sys.executable, str(tmp_path / "tool.py"), str(NVME / "nvme-cli-smart-log.json")]) + " {device}"
    c = collector(root, **{"nvme.smart-command": command, "nvme.smart-timeout": 1.0})
    text = render(c)
    golden("storage/nvme.prom", text)
    assert 'lockstep_nvme_media_errors_total{controller="nvme0"} 7' in text
    assert 'lockstep_nvme_written_bytes_total{controller="nvme0"} 33588269056000' in text   # 65602088 units
    for bad in ("nvme1", "nvme2", "nvme3"):
        assert f'lockstep_nvme_smart_success{{controller="{bad}"}} 0' in text
        assert f'lockstep_nvme_percentage_used_ratio{{controller="{bad}"}}' not in text
        assert f'lockstep_nvme_info{{controller="{bad}"' in text


def test_flags_are_checked():
    for flags, error in (({"nvme.smart-command": "nvme smart-log"}, "{device}"),
                         ({"nvme.smart-command": "nvme '{device}"}, "--nvme.smart-command"),
                         ({"nvme.smart-timeout": 0}, "smart-timeout")):
        with pytest.raises(ValueError, match=error):
            NvmeOptions.from_config(ExporterConfig(flags=MappingProxyType(flags)))
