"""The XID catalog (exporters/catalog/xid.csv, from NVIDIA's Xid Catalog) walked row by row, and the XID
counter's labels and log volume."""
from __future__ import annotations

import logging

import pytest

from lockstep.exporters.catalog import enums, xid
from lockstep.exporters.gpu import xid as xid_module
from lockstep.exporters.gpu.backend import GpuOptions
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.toolkit import logs
from tests.helpers.gpu import fake, h100, render, wait_for_xids


def test_catalog_covers_every_code_nvidia_documents_and_cites_it():
    assert sorted(xid.CATALOG) == list(range(1, 173))   # NVIDIA's catalog: XID 1 to 172
    assert xid.SOURCE in xid.PATH.read_text().split("code,mnemonic")[0]


@pytest.mark.parametrize("entry", xid.CATALOG.values(), ids=lambda e: str(e.code))
def test_every_row_is_classified(entry):
    assert entry.mnemonic and entry.description
    assert entry.category in enums.XID_CATEGORIES and entry.action in enums.XID_ACTIONS
    assert entry.severity in enums.XID_SEVERITIES
    assert set(entry.applies_to) <= {"A100", "H100", "B100", "GB200"}
    bucket = xid.BUCKETS.get(entry.nvidia_immediate_action)
    if bucket is not None:   # a plain resolution bucket maps one way
        assert entry.action == bucket, f"NVIDIA says {entry.nvidia_immediate_action}"
    else:                    # a workflow, or a blank in NVIDIA's table: the reading is explained
        assert entry.note, "a workflow or blank action needs a note saying how it was read"
    if entry.description == "Unused" and not entry.applies_to:
        assert (entry.category, entry.action) == ("unused", "investigate")


@pytest.mark.parametrize("code, category, action, severity", [
    (79, "hardware", "reboot_node", "critical"),     # fell off the bus: RESTART_BM
    (48, "hardware", "reset_gpu", "critical"),       # double-bit ECC: reset (drain and reset with 63/64)
    (94, "hardware", "restart_app", "warning"),      # contained: only that application restarts
    (95, "hardware", "reset_gpu", "critical"),       # uncontained: reset before anything runs again
    (13, "application", "restart_app", "warning"),   # graphics engine exception: the workload's bug
    (31, "application", "restart_app", "warning"),   # MMU fault: the workload's bug
    (43, "application", "none", "info"),             # software-induced fault; the GPU stays healthy
    (45, "application", "none", "info"),             # teardown after another error or a kill
    (119, "driver", "reset_gpu", "critical"),        # GSP RPC timeout
])
def test_documented_behaviour(code, category, action, severity):
    entry = xid.lookup(code)
    assert (entry.category, entry.action, entry.severity) == (category, action, severity)


def test_unknown_code_asks_someone_to_look():
    entry = xid.lookup(999)
    assert (entry.category, entry.action, entry.severity) == ("unknown", "investigate", "warning")


def test_repeats_are_counted_but_logged_once_per_interval(caplog, monkeypatch):
    monkeypatch.setattr(logs, "_once", set())
    nvml = fake.FakeNvml([h100(0), h100(1)])
    for _ in range(200):
        nvml.events.put((0, 79))
    for _ in range(3):
        nvml.events.put((1, 13))
    collector = GpuCollector(nvml, None, GpuOptions("nvml", hostname="node00"))
    try:
        with caplog.at_level(logging.INFO, logger="lockstep.gpu.xid"):
            render(collector)
            wait_for_xids(collector, {(0, 79): 200, (1, 13): 3})
            text = render(collector)
    finally:
        collector.close()
    assert ('lockstep_gpu_xid_errors_total{gpu="0",xid="79",severity="critical",category="hardware",'
            'action="reboot_node"} 200') in text
    lines = [r for r in caplog.records if r.getMessage() == "GPU XID error"]
    assert sorted((r.levelno, r.fields["xid"]) for r in lines) == [(logging.WARNING, 13), (logging.ERROR, 79)]


def test_a_repeat_after_the_interval_is_logged_with_the_count_it_stood_for(caplog, monkeypatch):
    clock = iter([0.0, 10.0, 20.0, 61.0]).__next__
    monkeypatch.setattr(xid_module.time, "monotonic", clock)
    watcher = xid_module.XidWatcher.__new__(xid_module.XidWatcher)
    watcher._gpus, watcher._counts, watcher._last, watcher._logged, watcher._seen_at = {7: 0}, {}, {}, {}, {}
    watcher._lock = xid_module.threading.Lock()
    monkeypatch.setattr(xid_module, "handle_key", lambda handle: handle)
    with caplog.at_level(logging.INFO, logger="lockstep.gpu.xid"):
        for _ in range(4):
            watcher._count(7, 48)
    lines = [r for r in caplog.records if r.getMessage() == "GPU XID error"]
    assert [(r.fields["total"], r.fields["repeats_since_last_log"]) for r in lines] == [(1, 0), (4, 2)]
    assert watcher.counts() == {(0, 48): 4}
    assert (watcher.worst_since(0, 60.0), watcher.worst_since(0, 61.0), watcher.worst_since(1, 0.0)) == (2, 0, 0)
