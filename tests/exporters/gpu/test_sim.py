"""GPU collector over the simulator's gpus.json (``sim:PATH``): golden exposition in lockstep and
dcgm-exporter names, XID delivery by seq, malformed and missing files, flag handling."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
from pathlib import Path

import pynvml
import pytest

from lockstep.exporters import cli
from lockstep.exporters.gpu import simevents
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.sim import SimFormatError, SimNvml
from tests.helpers.gpu import render, scrape_until_xids, sim_collector
from tests.helpers.paths import FIXTURES

FIXTURE = FIXTURES / "gpu/node00/gpus.json"


def rewrite(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)
    st = path.stat()  # same-second rewrites of the same size must still be seen as changed
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


@pytest.fixture
def gpus_json(tmp_path: Path) -> Path:
    path = tmp_path / "gpus.json"
    shutil.copy(FIXTURE, path)
    return path


@pytest.mark.parametrize("names", ["lockstep", "dcgm"])
def test_sim_golden(golden, gpus_json, names):
    collector = sim_collector(gpus_json, dcgm=names == "dcgm")
    try:
        scrape_until_xids(collector, {(0, 13): 2, (2, 79): 1})
        text = render(collector)
    finally:
        collector.close()
    golden(f"gpu/sim_{names}.prom", text)


class ThreadRecordingSim(SimNvml):
    """The simulator noting the thread that asks for each GPU's field batch."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.threads: set[str] = set()

    def nvmlDeviceGetFieldValues(self, handle, fieldIds):
        self.threads.add(threading.current_thread().name)
        return super().nvmlDeviceGetFieldValues(handle, fieldIds)


def test_sim_gpus_are_read_in_the_scrapes_thread_whatever_the_readers(gpus_json):
    """The simulator answers in Python under the GIL: a reader pool would only make its GPUs take turns."""
    options = GpuOptions("sim", gpus_json, hostname="node00")
    assert options.readers > 1
    nvml = ThreadRecordingSim(gpus_json)
    collector = GpuCollector(nvml, None, options, watch_xid=False)
    try:
        text = render(collector)
    finally:
        collector.close()
    assert nvml.threads == {threading.current_thread().name}
    assert 'lockstep_gpu_up{gpu="0"} 1' in text and 'lockstep_gpu_up{gpu="2"} 0' in text


def test_lost_gpu_is_down_and_others_unaffected(gpus_json):
    collector = sim_collector(gpus_json, watch_xid=False)
    text = render(collector)
    collector.close()
    assert 'lockstep_gpu_up{gpu="2"} 0' in text
    assert [line for line in text.splitlines() if 'gpu="2"' in line] == [
        'lockstep_gpu_up{gpu="2"} 0', 'lockstep_gpu_health{gpu="2",check="bus"} 2', 'lockstep_gpu_healthy{gpu="2"} 0']
    for gpu in ("0", "1"):
        assert f'lockstep_gpu_up{{gpu="{gpu}"}} 1' in text
        assert f'lockstep_gpu_temperature_celsius{{gpu="{gpu}"}}' in text


def test_repeated_xid_is_counted_again(gpus_json):
    collector = sim_collector(gpus_json)
    try:
        scrape_until_xids(collector, {(0, 13): 2, (2, 79): 1})
        doc = json.loads(gpus_json.read_text())
        doc["gpus"][1]["xid_events"] = [{"seq": 4, "xid": 79, "timestamp": 1.0}, {"seq": 5, "xid": 79, "timestamp": 2.0}]
        doc["gpus"][1]["lost"] = True
        rewrite(gpus_json, doc)
        scrape_until_xids(collector, {(0, 13): 2, (2, 79): 1, (1, 79): 2})
        text = render(collector)
    finally:
        collector.close()
    assert 'lockstep_gpu_up{gpu="1"} 0' in text and 'lockstep_gpu_up{gpu="0"} 1' in text


class LateHandleSim(SimNvml):
    """NVML refusing one GPU's handle until ``late`` is cleared (a GPU still lost when the agent started)."""

    def __init__(self, path: Path, late: int | None) -> None:
        super().__init__(path)
        self.late = late

    def nvmlDeviceGetHandleByIndex(self, index: int):
        if index == self.late:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return super().nvmlDeviceGetHandleByIndex(index)


def test_gpu_whose_handle_comes_late_gets_its_xids_counted(gpus_json):
    """Before: a GPU without a handle at start was never registered for XID events (until the GPU count
    changed). Now it is registered once its handle comes, on the same watcher: earlier counts are kept."""
    nvml = LateHandleSim(gpus_json, late=1)
    collector = GpuCollector(nvml, None, GpuOptions("sim", gpus_json, hostname="node00"))
    try:
        scrape_until_xids(collector, {(0, 13): 2, (2, 79): 1})
        assert 'lockstep_gpu_up{gpu="1"} 0' in render(collector)
        watcher = collector._xid
        nvml.late = None
        assert 'lockstep_gpu_up{gpu="1"} 1' in render(collector)
        doc = json.loads(gpus_json.read_text())
        doc["gpus"][1]["xid_events"] = [{"seq": 7, "xid": 48, "timestamp": 1767227300.0}]
        rewrite(gpus_json, doc)
        scrape_until_xids(collector, {(0, 13): 2, (2, 79): 1, (1, 48): 1})
        assert collector._xid is watcher
    finally:
        collector.close()


def test_event_wait_leaves_a_file_the_scrape_just_checked(gpus_json, monkeypatch):
    """The XID thread re-reads gpus.json only when no scrape has checked it within POLL_S: scraped once
    per simulator tick, its own parses (~0.5 ms each) were extra work on the same file."""
    monkeypatch.setattr(simevents, "POLL_S", 5.0)
    nvml = SimNvml(gpus_json)
    nvml.refresh()  # as the scrape's nvmlDeviceGetCount does
    reads = []
    refresh = nvml.refresh
    monkeypatch.setattr(nvml, "refresh", lambda: reads.append(1) or refresh())
    event_set = nvml.nvmlEventSetCreate()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(event_set, 50)
    assert reads == []
    nvml.checked_at -= 5.0  # no scrape for POLL_S
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(event_set, 50)
    assert reads == [1]


def test_malformed_file_names_file_and_line_then_recovers(gpus_json):
    collector = sim_collector(gpus_json, watch_xid=False)
    good = gpus_json.read_text()
    gpus_json.write_text(good.replace('"index": 1,', '"index": 1', 1))
    with pytest.raises(SimFormatError, match=rf"{gpus_json}:\d+: invalid JSON"):
        render(collector)
    doc = json.loads(good)
    del doc["gpus"][0]["uuid"]
    rewrite(gpus_json, doc)
    with pytest.raises(SimFormatError, match=r"gpus\[0\]\.uuid: missing"):
        render(collector)
    rewrite(gpus_json, json.loads(good))
    assert 'lockstep_gpu_up{gpu="0"} 1' in render(collector)
    collector.close()


def test_missing_file_means_no_gpus_until_it_appears(tmp_path):
    path = tmp_path / "gpus.json"
    collector = sim_collector(path, watch_xid=False)
    assert render(collector).splitlines()[-1] == "lockstep_node_gpus_visible 0"
    shutil.copy(FIXTURE, path)
    assert 'lockstep_gpu_up{gpu="1"} 1' in render(collector)
    collector.close()


def test_openmetrics_marks_dcgm_counters_without_total_as_unknown(gpus_json):
    collector = sim_collector(gpus_json, dcgm=True, watch_xid=False)
    text = render(collector, openmetrics=True)
    collector.close()
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown" in text
    assert "# TYPE lockstep_gpu_energy_joules counter" in text
    assert text.endswith("# EOF\n")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli.add_parser(sub, ["exporter", *argv])
    return parser.parse_args(["exporter", *argv])


def test_flags(tmp_path):
    (tmp_path / "node03").mkdir()
    config = cli.config_from_args(parse(["--sim.node-root", str(tmp_path / "node03")]))
    assert GpuOptions.from_config(config) == GpuOptions("sim", tmp_path / "node03" / "gpus.json", False, "node03")
    config = cli.config_from_args(parse(["--gpu.backend=dcgm", "--gpu.metric-names=dcgm"]))
    assert GpuOptions.from_config(config).backend == "dcgm" and GpuOptions.from_config(config).dcgm_names
    with pytest.raises(ValueError, match="--gpu.backend: 'cuda'"):
        GpuOptions.from_config(cli.config_from_args(parse(["--gpu.backend=cuda"])))
    with pytest.raises(ValueError, match="--gpu.backend"):
        GpuOptions.from_config(cli.config_from_args(parse(["--gpu.backend=sim:"])))


@pytest.mark.integration
def test_lockstep_names_pass_promtool_lint(gpus_json):
    """promtool's metric linter (units, _total, snake_case, HELP) on a whole GPU scrape."""
    import subprocess

    from lockstep.exporters.scrape import Scraper
    from lockstep.stack import require_binary
    scraper = Scraper({"gpu": sim_collector(gpus_json, watch_xid=False)})
    result = subprocess.run([require_binary("promtool"), "check", "metrics"], input=scraper.render(),
                            capture_output=True, text=True, timeout=30)
    scraper.close()
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("packed", [True, False])
def test_sim_field_values_read_through_pynvmls_members(gpus_json, monkeypatch, packed):
    """The batch the simulator builds in one struct call reads, member by member as pynvml's users read it,
    as the file says; so does the member-by-member fallback for a pynvml whose structure differs."""
    from lockstep.exporters.gpu import simfields
    if not packed:
        monkeypatch.setattr(simfields, "batch_layout", lambda count: None)
    entry = json.loads(gpus_json.read_text())["gpus"][0]
    nvml = SimNvml(gpus_json)
    nvml.nvmlInit()
    ids = [pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_FI_DEV_RETIRED_SBE, pynvml.NVML_FI_DEV_ENERGY,
           pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, pynvml.NVML_FI_DEV_REMAPPED_PENDING]
    values = nvml.nvmlDeviceGetFieldValues(nvml.nvmlDeviceGetHandleByIndex(0), ids)
    read = [(v.fieldId, v.nvmlReturn, v.value.ullVal if v.nvmlReturn == pynvml.NVML_SUCCESS else None)
            for v in values]
    ok = pynvml.NVML_SUCCESS
    assert read == [(ids[0], ok, entry["power_mw"]), (ids[1], pynvml.NVML_ERROR_NOT_SUPPORTED, None),
                    (ids[2], ok, entry["energy_mj"]), (ids[3], ok, sum(link["replay"] for link in entry["nvlink"])),
                    (ids[4], ok, int(entry["remapped_rows"]["pending"]))]
    assert all(v.valueType == pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG for v in values if v.nvmlReturn == ok)
