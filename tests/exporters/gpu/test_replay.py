"""Real driver captures (``nvidia-smi -q -x``, tests/fixtures/gpu/nvidia-smi) replayed through the GPU
collector: one reviewed golden exposition per capture (tests/golden/gpu/replay/README.md says how each
was checked against its XML), "not supported" absent rather than zero, and clear errors for bad files."""
from __future__ import annotations

import inspect
from pathlib import Path

import pynvml
import pytest

from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.replay import ReplayNvml
from lockstep.exporters.gpu.sim import SimNvml
from lockstep.exporters.gpu.smi_xml import Refused, SmiFormatError, parse_smi_log
from lockstep.exporters.scrape import Scraper
from tests.helpers.gpu import fake, render
from tests.helpers.paths import FIXTURES

CAPTURES = sorted((FIXTURES / "gpu/nvidia-smi").glob("*.xml"))
# Capture value → the series it must leave absent when NVML refused it.
ABSENT_WHEN_REFUSED = {
    "util_gpu": "lockstep_gpu_utilization_ratio{", "temp_memory": "lockstep_gpu_memory_temperature_celsius{",
    "power_limit": "lockstep_gpu_power_limit_watts{", "persistence": "lockstep_gpu_persistence_mode{",
    "ecc_current": "lockstep_gpu_ecc_enabled{", "ecc_corrected": 'type="corrected"',
    "ecc_uncorrected": 'type="uncorrected"', "remap_corr": 'state="correctable"', "remap_failure": 'state="failed"',
    "retired_sbe": 'cause="single_bit"', "retired_pending": "lockstep_gpu_retired_pages_pending{",
    "mig_current": "lockstep_gpu_mig_mode{", "mem_reserved": "lockstep_gpu_memory_reserved_bytes{",
}


def replay(path: Path, **options) -> GpuCollector:
    return GpuCollector(ReplayNvml(path), None, GpuOptions("replay", path, hostname="node00", **options),
                        watch_xid=False)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_capture_golden(path, golden):
    scraper = Scraper({"gpu": replay(path)})
    try:
        assert 'lockstep_scrape_collector_success{collector="gpu"} 1' in scraper.render()
        text = render(scraper.collectors["gpu"])
    finally:
        scraper.close()
    golden(f"gpu/replay/{path.stem}.prom", text)
    assert 'lockstep_gpu_up{gpu="0"} 1' in text
    values = parse_smi_log(path.read_text(), path.name).gpus[0].values
    for key, series in ABSENT_WHEN_REFUSED.items():
        if isinstance(values[key], Refused):
            assert series not in text, f"{path.name}: {key} is N/A in the capture but {series} is exported"
        else:
            assert series in text, f"{path.name}: {key} is {values[key]} in the capture but {series} is missing"


def test_mig_capture_reports_instances_and_leaves_parent_utilization_absent():
    text = render(replay(CAPTURES[0]))
    assert CAPTURES[0].name == "a100-sxm4-v12.xml"
    assert 'lockstep_gpu_mig_mode{gpu="0"} 1' in text
    assert "lockstep_gpu_utilization_ratio" not in text   # <gpu_util>N/A</gpu_util> with MIG on
    for gi in (3, 4, 5, 6):   # 19968 MiB and 12 MiB used per GPU instance in the capture
        assert f'lockstep_gpu_mig_memory_total_bytes{{gpu="0",gpu_instance="{gi}",profile=""}} 20937965568' in text
        assert f'lockstep_gpu_mig_memory_used_bytes{{gpu="0",gpu_instance="{gi}",profile=""}} 12582912' in text


def test_malformed_capture_names_file_gpu_and_element(tmp_path):
    good = (CAPTURES[0].parent / "tesla-t4.xml").read_text()
    broken = tmp_path / "broken.xml"
    broken.write_text(good.replace("<gpu_temp>40 C</gpu_temp>", "<gpu_temp>40 F</gpu_temp>"))
    with pytest.raises(SmiFormatError, match=r"broken.xml: gpu 00000000:00:1E.0: <gpu_temp> '40 F' is not a C"):
        ReplayNvml(broken)
    broken.write_text(good[:500])
    with pytest.raises(SmiFormatError, match="broken.xml: not XML"):
        ReplayNvml(broken)


def test_replay_is_pynvml_shaped():
    """Every NVML call the backends and the test fake answer exists in pynvml with the same parameters,
    so the collector never calls something the real binding lacks."""
    for backend in (ReplayNvml, SimNvml, fake.FakeNvml):
        for name, method in inspect.getmembers(backend, inspect.isfunction):
            if not name.startswith("nvml"):
                continue
            real = getattr(pynvml, name, None)
            assert real is not None, f"{backend.__name__}.{name} is not a pynvml function"
            ours = list(inspect.signature(method).parameters)[1:]
            assert ours == list(inspect.signature(real).parameters), f"{backend.__name__}.{name} parameters"


def test_refusals_raise_pynvml_error_classes():
    nvml = ReplayNvml(CAPTURES[0].parent / "gtx-1660-ti.xml")   # driver 418
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetEccMode(handle)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)   # R535 renamed throttle → clock-event reasons
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetMigMode(handle)                     # no MIG API before R450
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetMemoryInfo(handle, pynvml.nvmlMemory_v2)
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle) == 0x1   # gpu_idle Active


H200 = FIXTURES / "gpu/nvml-h200"
# What `nvidia-smi -q` cannot give the replay: it prints no energy counter, and the replay runs no XID watcher.
NOT_IN_A_CAPTURE = {'lockstep_gpu_energy_joules_total{gpu="0"}', 'lockstep_gpu_health{gpu="0",check="xid"}'}
# Readings that move between two looks at a loaded GPU (the capture and the scrape were seconds apart).
MOVING = ("lockstep_gpu_power_watts{", "lockstep_gpu_sm_clock_hertz{", "lockstep_gpu_utilization_ratio{")


def gpu_series(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(("lockstep_gpu_", "lockstep_node_gpus_visible"))}


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_replay_serves_what_the_real_driver_served_for_the_same_gpu(state):
    """bench/gpu_capture.sh scraped a real H200 through NVML with the node agent (agent-STATE.prom) and
    saved `nvidia-smi -q -x` of the same GPU seconds apart, idle and under a matmul load: replaying the
    capture gives the same series, bar the two a capture cannot hold, and the same values, bar readings
    that move between the two looks and memory that nvidia-smi prints in whole MiB."""
    replayed = gpu_series(render(replay(CAPTURES[0].parent / f"h200-{state}-v13.xml")))
    real = gpu_series((H200 / f"agent-{state}.prom").read_text())
    assert set(real) - set(replayed) == NOT_IN_A_CAPTURE
    assert set(replayed) <= set(real)
    for series, value in replayed.items():
        if series.startswith(MOVING):
            continue
        tolerance = 2 ** 20 if series.startswith("lockstep_gpu_memory_") and "_bytes{" in series else 0
        assert abs(value - real[series]) <= tolerance, f"{series}: replay {value}, real NVML {real[series]}"
    assert real['lockstep_gpu_clock_event_active{gpu="0",reason="sw_power_cap"}'] == (state == "busy")
