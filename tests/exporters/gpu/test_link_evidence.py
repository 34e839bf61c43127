"""Link and bus evidence in the per-GPU verdict (exporters/gpu/health.py): a PCIe link trained below its
maximum under load (``pcie_link``), clocks held back with no thermal or power cause (``clocks``), fewer
NVLinks active than the GPU has (``nvlink_links``); on the real ``nvidia-smi -q -x`` captures replayed,
and on the fake NVML."""
from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from lockstep.exporters.catalog.enums import reason_bits
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.health import CLOCKS_PERSIST_S, HealthTracker
from lockstep.exporters.gpu.replay import ReplayNvml
from lockstep.exporters.gpu.snapshot import GpuSnapshot, GpuStatic
from tests.helpers.gpu import fake, h100, render
from tests.helpers.paths import FIXTURES

CAPTURES = FIXTURES / "gpu/nvidia-smi"
STATIC = GpuStatic(0, "GPU-0", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", pcie_width_max=16, pcie_gen_max=5)


def verdicts(path: Path, **options) -> dict[str, float]:
    c = GpuCollector(ReplayNvml(path), None, GpuOptions("replay", path, hostname="node00", **options), watch_xid=False)
    try:
        text = render(c)
    finally:
        c.close()
    return {line.split('check="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith('lockstep_gpu_health{gpu="0"')}


@pytest.mark.parametrize("name", ["rtx-3060-v12", "rtx-3090-v12", "rtx-4000-sff-ada-v13", "gtx-1660-ti", "a10g"])
def test_an_idle_gpu_at_gen_1_is_not_called_downtrained(name):
    """These captures were taken at 0 % utilization with the link at gen 1 of 3 or 4: power saving."""
    checks = verdicts(CAPTURES / f"{name}.xml")
    assert "pcie_link" not in checks
    assert checks["clocks"] == 0      # idle is a reason, but not one that needs a cause


def test_a_busy_gpu_at_its_maximum_link_is_ok():
    """rtx-3080-v13.xml: 65 % busy at gen 4 x16 of gen 4 x16."""
    assert verdicts(CAPTURES / "rtx-3080-v13.xml")["pcie_link"] == 0


@pytest.mark.parametrize("element, value", [("current_link_gen", "2"), ("current_link_width", "8x")])
def test_the_same_busy_capture_with_its_link_trained_down_is_a_warning(tmp_path, element, value):
    """The real rtx-3080-v13 capture with one value changed: what nvidia-smi prints for a link that came
    up at gen 2, or at x8, under the same load."""
    text = (CAPTURES / "rtx-3080-v13.xml").read_text()
    start = text.index(f"<{element}>")
    end = text.index(f"</{element}>", start)
    path = tmp_path / "downtrained.xml"
    path.write_text(text[:start] + f"<{element}>{value}" + text[end:])
    assert verdicts(path)["pcie_link"] == 1


def snap(**values) -> GpuSnapshot:
    return GpuSnapshot(STATIC, **values)


def test_the_link_verdict_under_load_is_held_while_idle():
    tracker = HealthTracker()
    assert "pcie_link" not in tracker.verdict(snap(utilization_gpu=0, pcie_gen=1, pcie_width=16), 0, None)
    assert tracker.verdict(snap(utilization_gpu=90, pcie_gen=3, pcie_width=16), 15, None)["pcie_link"] == 1
    assert tracker.verdict(snap(utilization_gpu=0, pcie_gen=1, pcie_width=16), 30, None)["pcie_link"] == 1
    assert tracker.verdict(snap(utilization_gpu=90, pcie_gen=5, pcie_width=16), 45, None)["pcie_link"] == 0


HW_SLOWDOWN, APP_CLOCKS = reason_bits(["hw_slowdown"]), reason_bits(["applications_clocks_setting"])


@pytest.mark.parametrize("reasons, level", [
    (HW_SLOWDOWN, 1), (APP_CLOCKS, 1),
    (HW_SLOWDOWN | reason_bits(["hw_thermal_slowdown"]), 0),        # heat explains it
    (HW_SLOWDOWN | reason_bits(["hw_power_brake_slowdown"]), 0),    # the power brake explains it
    (APP_CLOCKS | reason_bits(["sw_power_cap"]), 0),                # the power cap explains it
    (reason_bits(["sw_power_cap"]), 0), (reason_bits(["gpu_idle"]), 0),
])
def test_clocks_held_back_without_a_cause_for_five_minutes_is_a_warning(reasons, level):
    tracker = HealthTracker()
    assert tracker.verdict(snap(clock_event_reasons=reasons), 0, None)["clocks"] == 0
    assert tracker.verdict(snap(clock_event_reasons=reasons), CLOCKS_PERSIST_S - 1, None)["clocks"] == 0
    assert tracker.verdict(snap(clock_event_reasons=reasons), CLOCKS_PERSIST_S, None)["clocks"] == level


def test_an_interrupted_slowdown_starts_its_five_minutes_again():
    tracker = HealthTracker()
    tracker.verdict(snap(clock_event_reasons=HW_SLOWDOWN), 0, None)
    tracker.verdict(snap(clock_event_reasons=0), 200, None)
    tracker.verdict(snap(clock_event_reasons=HW_SLOWDOWN), 250, None)
    assert tracker.verdict(snap(clock_event_reasons=HW_SLOWDOWN), 400, None)["clocks"] == 0
    assert tracker.verdict(snap(clock_event_reasons=HW_SLOWDOWN), 550, None)["clocks"] == 1


def test_fewer_nvlinks_active_than_the_gpu_has_is_a_warning():
    """GPU 0 knows three links and has link 1 down; GPU 1 has all three up; per-link mode only."""
    gpus = [h100(0), h100(1, nvlink=[[0, 0, 0, 0]] * 3)]
    for per_link, expected in ((True, {"0": "1", "1": "0"}), (False, {})):
        c = GpuCollector(fake.FakeNvml(gpus), None, GpuOptions("nvml", nvlink_per_link=per_link), watch_xid=False)
        try:
            text = render(c)
        finally:
            c.close()
        found = {line.split('"')[1]: line.rsplit(" ", 1)[1] for line in text.splitlines()
                 if 'check="nvlink_links"' in line}
        assert found == expected


def test_the_fake_nvml_refuses_a_link_beyond_the_gpus_topology():
    nvml = fake.FakeNvml([h100(0)])
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetNvLinkState(nvml.handles[0], 3)
