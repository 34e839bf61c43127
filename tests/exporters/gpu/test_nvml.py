"""GPU collector over a fake NVML that speaks pynvml's API (tests/fixtures/gpu/fake_pynvml.py):
golden exposition, NotSupported / GPU_IS_LOST / FunctionNotFound handling, XID event thread."""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from types import SimpleNamespace

import pynvml
import pytest

from lockstep.exporters.gpu import xid as xid_module
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.read import read_snapshot
from lockstep.exporters.gpu.samples import identity_samples, snapshot_samples
from lockstep.exporters.gpu.snapshot import GpuSnapshot, GpuStatic
from lockstep.exporters.toolkit import logs
from tests.helpers.gpu import NS, Err, fake, h100, render, wait_for_xids
from tests.helpers.paths import FIXTURES


def node() -> list[dict]:
    """GPU 0 healthy; GPU 1 an older board (no memory temperature, no instant power, no NVLink, no
    persistence query), throttled, with P2P blocked; GPU 2 fell off the bus."""
    limited_fields = dict(h100(1)["fields"])
    limited_fields[pynvml.NVML_FI_DEV_MEMORY_TEMP] = NS
    limited_fields[pynvml.NVML_FI_DEV_POWER_INSTANT] = NS
    for field in (pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
                  pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL):
        limited_fields[field] = NS
    return [h100(0),
            h100(1, fields=limited_fields, nvlink=NS, persistence=NS, reasons=0x4 | 0x40, temp=89,
                 clocks={pynvml.NVML_CLOCK_SM: 1410, pynvml.NVML_CLOCK_MEM: 2619},
                 p2p={0: pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED, 2: NS}),
            h100(2, lost=True)]


@pytest.fixture
def options() -> GpuOptions:
    return GpuOptions("nvml", dcgm_names=False, hostname="node00")


def test_fake_nvml_golden(golden):
    nvml = fake.FakeNvml(node())
    for event in [(0, 13), (0, 13), (2, 79)]:
        nvml.events.put(event)
    collector = GpuCollector(nvml, None, GpuOptions("nvml", hostname="node00", nvlink_per_link=True))
    try:
        render(collector)  # starts the event thread
        wait_for_xids(collector, {(0, 13): 2, (2, 79): 1})
        text = render(collector)
    finally:
        collector.close()
    golden("gpu/fake_nvml.prom", text)
    assert 'lockstep_gpu_up{gpu="2"} 0' in text and 'lockstep_gpu_up{gpu="1"} 1' in text
    assert [line for line in text.splitlines() if 'gpu="2"' in line] == [
        'lockstep_gpu_up{gpu="2"} 0', 'lockstep_gpu_health{gpu="2",check="bus"} 2',
        'lockstep_gpu_health{gpu="2",check="xid"} 2', 'lockstep_gpu_healthy{gpu="2"} 0',
        'lockstep_gpu_xid_errors_total{gpu="2",xid="79",severity="critical",category="hardware",action="reboot_node"} 1']
    assert 'lockstep_gpu_power_watts{gpu="0"} 702.5' in text      # instant power field
    assert 'lockstep_gpu_power_watts{gpu="1"} 650' in text        # fell back to nvmlDeviceGetPowerUsage
    assert 'lockstep_gpu_memory_temperature_celsius{gpu="1"}' not in text  # absent, not zero
    assert 'lockstep_gpu_nvlink_errors_total{gpu="0",link="total",type="recovery"} 2' in text
    assert 'link="1"' not in text  # inactive link skipped; link 2 after it still read
    assert 'lockstep_gpu_nvlink_errors_total{gpu="0",link="2",type="recovery"} 2' in text


def test_old_driver_without_field_values_golden(golden, options):
    nvml = fake.FakeNvml([h100(0), h100(1)],
                         missing=["nvmlDeviceGetFieldValues", "nvmlDeviceGetCurrentClocksEventReasons",
                                  "nvmlDeviceGetMemoryInfo_v2"])
    collector = GpuCollector(nvml, None, options, watch_xid=False)
    text = render(collector)
    collector.close()
    golden("gpu/fake_nvml_old_driver.prom", text)
    assert 'lockstep_gpu_ecc_errors_total{gpu="0",type="corrected"} 5' in text
    assert 'lockstep_gpu_clock_event_active{gpu="0",reason="gpu_idle"} 0' in text
    assert "lockstep_gpu_memory_temperature_celsius" not in text


def test_library_missing_reports_no_gpus_visible_and_retries_later(options):
    """No driver: no GPU series, but the node says it sees 0 GPUs (so GPUMissing can fire)."""
    nvml = fake.FakeNvml([h100(0)], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    collector = GpuCollector(nvml, None, dataclasses.replace(options, expected_count=8))
    none_visible = ["lockstep_node_gpus_visible 0", "lockstep_node_gpus_expected 8"]
    assert [line for line in render(collector).splitlines() if not line.startswith("#")] == none_visible
    nvml.init_error = None
    assert [line for line in render(collector).splitlines() if not line.startswith("#")] == none_visible
    collector._retry_at = 0.0   # the retry interval passed: nvmlInit again
    assert "lockstep_node_gpus_visible 1" in render(collector) and 'lockstep_gpu_up{gpu="0"} 1' in render(collector)
    collector.close()


def test_not_supported_is_logged_once_at_debug(caplog, options, monkeypatch):
    monkeypatch.setattr(logs, "_once", set())
    collector = GpuCollector(fake.FakeNvml(node()), None, options, watch_xid=False)
    with caplog.at_level(logging.DEBUG, logger="lockstep.gpu"):
        render(collector)
        render(collector)
    collector.close()
    lines = [r for r in caplog.records if "nvmlDeviceGetPersistenceMode" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG


def test_xid_thread_survives_errors_and_stops_cleanly(options, monkeypatch):
    monkeypatch.setattr(xid_module, "RETRY_S", 0.05)
    nvml = fake.FakeNvml([h100(0), h100(1)])
    nvml.events.put(Err(pynvml.NVML_ERROR_UNKNOWN))
    nvml.events.put((1, 48))
    nvml.events.put((1, 48))
    collector = GpuCollector(nvml, None, options)
    render(collector)
    wait_for_xids(collector, {(1, 48): 2})
    assert nvml.calls.count("event_set_create") == 2   # re-registered after the error
    thread = collector._xid
    collector.close()
    assert not thread.alive()
    assert nvml.calls.count("event_set_free") == 2 and "shutdown" in nvml.calls


class FlakyEvents:
    """pynvml's event-set calls; the first wait fails with a non-NVML error, as the simulator backend
    does on an ``xid_events`` entry without ``seq``; then one XID 79 arrives."""

    def __init__(self) -> None:
        self.waits = 0

    def nvmlEventSetCreate(self):
        return SimpleNamespace()

    def nvmlDeviceRegisterEvents(self, handle, event_types, event_set) -> None:
        pass

    def nvmlEventSetFree(self, event_set) -> None:
        pass

    def nvmlEventSetWait(self, event_set, timeout_ms):
        self.waits += 1
        if self.waits == 1:
            raise KeyError("seq")
        if self.waits == 2:
            return SimpleNamespace(device=HANDLE, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
        time.sleep(0.01)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)


HANDLE = SimpleNamespace(index=0)


def test_xid_watcher_survives_a_non_nvml_error(monkeypatch):
    """Before: any exception but NVMLError ended the watcher thread silently, and XIDs were never counted again."""
    monkeypatch.setattr(xid_module, "RETRY_S", 0.01)
    watcher = xid_module.XidWatcher(FlakyEvents(), [HANDLE])
    try:
        deadline = time.monotonic() + 5
        while not watcher.counts() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.counts() == {(0, 79): 1}
        assert watcher.alive()
    finally:
        watcher.close()
    assert not watcher.alive()


def test_unknown_error_marks_only_that_gpu_lost(options):
    """A wedged GPU answers NVML_ERROR_UNKNOWN; it is reported down, its neighbour is not."""
    nvml = fake.FakeNvml([h100(0, temp=Err(pynvml.NVML_ERROR_UNKNOWN)), h100(1)])
    collector = GpuCollector(nvml, None, options, watch_xid=False)
    text = render(collector)
    collector.close()
    assert 'lockstep_gpu_up{gpu="0"} 0' in text and 'lockstep_gpu_up{gpu="1"} 1' in text
    assert 'lockstep_gpu_info{gpu="0",uuid="GPU-5e0b1b1a-7c3d-4f0e-8a55-91c3d2e4f600"' in text
    assert 'lockstep_gpu_temperature_celsius{gpu="0"}' not in text
    assert 'lockstep_gpu_temperature_celsius{gpu="1"} 74' in text


def test_reused_series_follow_the_clock_mask_and_the_static_facts():
    """Clock-event, maxima, P2P and identity series are built once per mask / GpuStatic and reused:
    a new mask, a static re-read after a reopen, or a GPU going down must still show."""
    static = GpuStatic(0, "GPU-0", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", sm_clock_max_mhz=1980,
                       p2p=((1, pynvml.NVML_P2P_STATUS_OK),))

    def series(snap: GpuSnapshot) -> dict:
        return {(s.metric.name, s.labels[1:]): s.value for s in snapshot_samples(snap)}

    event = "lockstep_gpu_clock_event_active"
    throttled = series(GpuSnapshot(static, clock_event_reasons=0x40))
    idle = series(GpuSnapshot(static, clock_event_reasons=0x1))
    assert throttled[(event, ("hw_thermal_slowdown",))] == 1 and throttled[(event, ("gpu_idle",))] == 0
    assert idle[(event, ("hw_thermal_slowdown",))] == 0 and idle[(event, ("gpu_idle",))] == 1
    blocked = pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED
    reopened = series(GpuSnapshot(dataclasses.replace(static, sm_clock_max_mhz=1755, p2p=((1, blocked),))))
    assert reopened[("lockstep_gpu_sm_clock_max_hertz", ())] == 1755e6
    assert reopened[("lockstep_gpu_p2p_status", ("1",))] == blocked
    assert [s.value for s in identity_samples(static, "550.90.07", up=True)] == [1.0, 1.0]
    assert [s.value for s in identity_samples(static, "550.90.07", up=False)] == [1.0, 0.0]


class _Calls:
    """An NVML module that records which functions were called."""

    def __init__(self, nvml) -> None:
        self._nvml, self.names = nvml, set()

    def __getattr__(self, name: str):
        if name.startswith("nvml"):
            self.names.add(name)
        return getattr(self._nvml, name)


def test_fake_h100_takes_the_paths_a_real_hopper_driver_took():
    """Checked against a real driver: bench/gpu_capture.sh recorded on an H200 (driver 580) which NVML
    functions one collector run called and which fields came back absent (nvml-busy.json). The fake's
    H100 must lead the collector down the same calls (the XID watcher's apart: watch_xid is off here)
    and refuse the same fields: Hopper retires no pages, it remaps rows."""
    record = json.loads((FIXTURES / "gpu/nvml-h200/nvml-busy.json").read_text())
    xid_watcher = ("nvmlEvent", "nvmlDeviceRegisterEvents")
    real_calls = {name for name in record["nvml_calls"] if not name.startswith(xid_watcher)}
    calls = _Calls(fake.FakeNvml([h100(0)]))
    collector = GpuCollector(calls, None, GpuOptions("nvml", hostname="node00"), watch_xid=False)
    collector.collect()
    snapshot = dataclasses.asdict(read_snapshot(calls, collector._static[0], collector._handles[0]))
    collector.close()
    assert calls.names == real_calls
    real_absent = {field for field, value in record["snapshots"][0].items() if value is None}
    # Fields the snapshot gained after the capture (nvlink_links: per-link mode only, off here) are not compared.
    assert {field for field, value in snapshot.items() if value is None and field in record["snapshots"][0]} == real_absent


class _AskedFields(fake.FakeNvml):
    """The fake, recording the field ids of each nvmlDeviceGetFieldValues call."""

    def __init__(self, devices) -> None:
        super().__init__(devices)
        self.asked: list[set[int]] = []

    def nvmlDeviceGetFieldValues(self, handle, fieldIds):
        self.asked.append(set(fieldIds))
        return super().nvmlDeviceGetFieldValues(handle, fieldIds)


def test_fields_a_gpu_never_answers_are_asked_for_once_and_the_rest_every_scrape(options):
    """Hopper answers NotSupported for retired pages every time, until the driver changes: after the first
    scrape the batch leaves them out. An answer that may change (no permission, no data yet) is asked again,
    and a field that reports the GPU lost still takes the GPU down."""
    device = h100(0)
    fields = device["fields"]
    fields[pynvml.NVML_FI_DEV_MEMORY_TEMP] = Err(pynvml.NVML_ERROR_NO_PERMISSION)
    fields[pynvml.NVML_FI_DEV_POWER_INSTANT] = Err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    never = {pynvml.NVML_FI_DEV_RETIRED_SBE, pynvml.NVML_FI_DEV_RETIRED_DBE, pynvml.NVML_FI_DEV_RETIRED_PENDING,
             pynvml.NVML_FI_DEV_POWER_INSTANT}
    assert not never & set(fields) - {pynvml.NVML_FI_DEV_POWER_INSTANT}   # the fake's H100 answers NotSupported
    nvml = _AskedFields([device])
    collector = GpuCollector(nvml, None, options, watch_xid=False)
    try:
        first, second = render(collector), render(collector)
        fields[pynvml.NVML_FI_DEV_ENERGY] = Err(pynvml.NVML_ERROR_GPU_IS_LOST)
        lost = render(collector)
    finally:
        collector.close()
    every = nvml.asked[0]
    assert never < every and pynvml.NVML_FI_DEV_MEMORY_TEMP in every
    assert nvml.asked[1:] == [every - never] * 2
    assert first == second and "lockstep_gpu_energy_joules_total" in second
    assert "lockstep_gpu_memory_temperature_celsius" not in second and "lockstep_gpu_retired" not in second
    assert 'lockstep_gpu_up{gpu="0"} 0' in lost
