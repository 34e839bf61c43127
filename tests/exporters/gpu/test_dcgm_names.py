"""``--gpu.metric-names=dcgm`` against real dcgm-exporter output (tests/fixtures/gpu/dcgm-exporter, README
there): for every DCGM_FI_* field both export, the same name, type and label keys, the HELP text of
dcgm-exporter's default-counters.csv, and values in dcgm-exporter's units on the same GPU model (a
Tesla T4: our side replays the real T4 nvidia-smi capture)."""
from __future__ import annotations

import re

from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.dcgm import DcgmProf
from lockstep.exporters.gpu.replay import ReplayNvml
from tests.helpers import paths
from tests.helpers.gpu import DcgmReader, render

FIXTURES = paths.FIXTURES / "gpu"
CORE_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
# Upper bounds in dcgm-exporter's units for a Tesla T4 (from the T4 capture: max clocks 1590/5001 MHz,
# 70 W limit, 15360 MiB, 96 C shutdown): a value exported in Hz, mW or bytes would overshoot by 1e3-1e6.
T4_BOUNDS = {"DCGM_FI_DEV_SM_CLOCK": 1590, "DCGM_FI_DEV_MEM_CLOCK": 5001, "DCGM_FI_DEV_POWER_USAGE": 70,
             "DCGM_FI_DEV_FB_FREE": 15360, "DCGM_FI_DEV_FB_USED": 15360, "DCGM_FI_DEV_GPU_TEMP": 96,
             "DCGM_FI_DEV_GPU_UTIL": 100, "DCGM_FI_DEV_MEM_COPY_UTIL": 100}


def families(text: str) -> dict[str, dict]:
    """name → {type, help, labels: [key tuples], values, dummy}; ``dummy`` after the capture's NOTE line."""
    out: dict[str, dict] = {}
    dummy = False
    for line in text.splitlines():
        if line.startswith("# NOTE The following metrics all have dummy values"):
            dummy = True
        elif m := re.match(r"# (HELP|TYPE) (\S+) ?(.*)", line):
            out.setdefault(m[2], {"labels": [], "values": [], "dummy": dummy})[m[1].lower()] = m[3]
        elif m := re.match(r"([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)", line):
            fam = out.setdefault(m[1], {"labels": [], "values": [], "dummy": dummy})
            fam["labels"].append(tuple(re.findall(r'(\w+)="', m[2] or "")))
            fam["values"].append(float(m[3]))
    return out


def default_counters() -> dict[str, tuple[str, str]]:
    rows = (line.split(",", 2) for line in (FIXTURES / "dcgm-exporter/default-counters.csv").read_text().splitlines()
            if line.strip() and not line.startswith("#"))
    return {name.strip(): (kind.strip(), help.strip()) for name, kind, help in rows}


def ours() -> dict[str, dict]:
    reader = DcgmReader(fieldIds=[], updateFrequency=1)
    reader.GetLatestGpuValuesAsFieldIdDict = lambda: {0: {1002: 0.5, 1003: 0.25, 1004: 0.125, 1005: 0.0625}}
    collector = GpuCollector(ReplayNvml(FIXTURES / "nvidia-smi/tesla-t4.xml"), DcgmProf(reader),
                             GpuOptions("dcgm", dcgm_names=True, hostname="node00"), watch_xid=False)
    try:
        return {name: fam for name, fam in families(render(collector)).items() if name.startswith("DCGM_FI_")}
    finally:
        collector.close()


def test_names_types_and_label_keys_match_dcgm_exporter():
    real, mine = families((FIXTURES / "dcgm-exporter/datadog-dcgm-metrics.txt").read_text()), ours()
    shared = sorted(real.keys() & mine.keys())
    assert set(shared) >= {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP",
                           "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL",
                           "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE",
                           "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_PROF_DRAM_ACTIVE",
                           "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}
    for name in shared:
        assert mine[name]["type"] == real[name]["type"], name
        if real[name]["dummy"]:   # the capture's authors left these unlabelled at 0: name and type only
            continue
        for keys in real[name]["labels"]:
            # Deployment-chosen label fields (DCGM_FI_PROCESS_NAME, DCGM_FI_DEV_SERIAL...) and the pod labels of
            # a Kubernetes scrape are not dcgm-exporter's own; newer dcgm-exporter adds pci_bus_id after UUID.
            assert tuple(k for k in keys if k in CORE_LABELS) == CORE_LABELS, (name, keys)
            assert [k for k in mine[name]["labels"][0] if k != "pci_bus_id"] == list(CORE_LABELS), name


def test_help_texts_are_dcgm_exporters_default_counters():
    counters = default_counters()
    for name, fam in ours().items():
        if name in counters:
            assert (fam["type"], fam["help"]) == counters[name], name


def test_values_are_in_dcgm_exporter_units_on_the_same_gpu_model():
    real, mine = families((FIXTURES / "dcgm-exporter/datadog-dcgm-metrics.txt").read_text()), ours()
    for name, bound in T4_BOUNDS.items():
        assert real[name]["labels"] and 0 <= real[name]["values"][0] <= bound, name   # the real T4 within the bound
        assert 0 <= mine[name]["values"][0] <= bound, (name, mine[name]["values"][0])
    assert mine["DCGM_FI_DEV_FB_USED"]["values"] == [1032]       # <used>1032 MiB</used> in the T4 capture
    assert mine["DCGM_FI_DEV_POWER_USAGE"]["values"] == [26.78]  # <power_draw>26.78 W</power_draw>
    assert mine["DCGM_FI_PROF_DRAM_ACTIVE"]["values"] == [0.0625] and real["DCGM_FI_PROF_DRAM_ACTIVE"]["values"][0] <= 1
