"""Pure parsers and readers of the fabric package: sysfs attributes, counters, ethtool text, PFC table."""
from __future__ import annotations

import os

import pytest

from lockstep.exporters.catalog import fabric as m
from lockstep.exporters.collectors.infiniband import parse_expected_rates
from lockstep.exporters.fabric import ib
from lockstep.exporters.fabric.ethtool import parse_ethtool_stats
from lockstep.exporters.fabric.pci import bdf_key, parse_pci_chain
from lockstep.exporters.fabric.pfc_table import infer_driver, plan
from lockstep.exporters.fabric.sysfs import HeldFiles
from tests.helpers.needs import platform_lacks


@pytest.mark.parametrize("text,expected", [
    ("400 Gb/sec (4X NDR)\n", 50e9), ("100 Gb/sec (4X EDR)", 12.5e9), ("2.5 Gb/sec (1X SDR)", 312.5e6),
    ("25 Gb/sec (1X EDR)", 3.125e9), ("200 Gb/sec (2X NDR)", 25e9)])
def test_rate_is_bytes_per_second(text, expected):
    assert ib.parse_rate(text) == expected


def test_rate_garbage_is_an_error():
    with pytest.raises(ValueError, match="Gb/sec"):
        ib.parse_rate("fast")


def test_state():
    assert ib.parse_state("4: ACTIVE\n") == ib.PortState(4, "ACTIVE")
    assert ib.parse_state("5: LinkUp") == ib.PortState(5, "LinkUp")
    with pytest.raises(ValueError):
        ib.parse_state("ACTIVE")


def test_no_pma_is_absent_not_zero():
    assert ib.parse_counter(b"N/A (no PMA)\n") is None
    assert ib.parse_counter(b"0\n") == 0
    with pytest.raises(ValueError):
        ib.parse_counter(b"lots\n")


def test_data_counters_count_four_octet_words():
    scale = {c.name: c.scale for c in ib.plan_counters(["port_xmit_data", "port_xmit_packets", "port_rcv_data"])}
    assert scale == {"port_xmit_data": 4, "port_xmit_packets": 1, "port_rcv_data": 4}


def test_counters_ext_replaces_legacy_counter_which_stays_as_fallback():
    plan = ib.plan_counters(["port_rcv_data", "symbol_error"], ["port_rcv_data_64", "port_unknown_64"])
    legacy = ib.CounterFile("port_rcv_data", "counters/port_rcv_data", 2**32 - 1, 4)
    assert plan == (ib.CounterFile("port_rcv_data", "counters_ext/port_rcv_data_64", None, 4, legacy),
                    ib.CounterFile("symbol_error", "counters/symbol_error", 65535, 1))


@pytest.mark.parametrize("name,pinned", [("port_xmit_data", 2**32 - 1), ("symbol_error", 65535),
                                         ("link_downed", 255), ("excessive_buffer_overrun_errors", 15),
                                         ("unicast_xmit_packets", None)])
def test_legacy_counters_pin_at_their_width(name, pinned):
    assert ib.plan_counters([name])[0].pinned == pinned


def test_expected_rate_flag():
    assert parse_expected_rates(["mlx5_*=400", "mlx4_0=40,hfi1_*=100"]) == (
        ("mlx5_*", 50e9), ("mlx4_0", 5e9), ("hfi1_*", 12.5e9))
    for bad in ("mlx5_*", "=400", "mlx5_*=fast", "mlx5_*=0"):
        with pytest.raises(ValueError, match="expected-rate"):
            parse_expected_rates([bad])


def test_ethtool_text():
    names, values = parse_ethtool_stats("NIC statistics:\n     rx_packets: 12\n     rx_priority_3_xoff.nic: 7\n")
    assert names == ("rx_packets", "rx_priority_3_xoff.nic") and values == (12, 7)


def test_ethtool_text_error_names_file_and_line():
    with pytest.raises(ValueError, match=r"stats\.txt: line 3: .*'rx_bytes: -'"):
        parse_ethtool_stats("NIC statistics:\n     rx_packets: 12\n     rx_bytes: -\n", "stats.txt")


def test_pfc_plan_maps_only_table_names():
    names = ("rx_bytes", "rx_prio3_pause", "rx_prio3_pause_duration", "tx_prio7_pause", "rx_prio8_pause",
             "tx_pause_storm_error_events")
    slots = plan("mlx5_core", names)
    assert [(s.index, s.metric, s.labels, s.divisor) for s in slots] == [
        (1, m.PFC_PAUSE_FRAMES, ("3", "rx"), 1), (2, m.PFC_PAUSE_DURATION, ("3", "rx"), 10**6),
        (3, m.PFC_PAUSE_FRAMES, ("7", "tx"), 1), (5, m.PFC_STORM_EVENTS, ("error",), 1)]
    assert plan("veth", names) is None


def test_driver_inferred_from_counter_names():
    assert infer_driver(("rx_bytes", "tx_prio3_pause")) == "mlx5_core"
    assert infer_driver(("rx_pfc_ena_frames_pri2",)) == "bnxt_en"
    assert infer_driver(("tx_priority_5_xoff.nic",)) == "ice"
    assert infer_driver(("rx_bytes",)) is None


@pytest.mark.parametrize("path,chain", [
    ("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0",
     ("0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:18:00.0")),
    ("/host/sys/devices/pci0000:00/0000:00:03.0", ("0000:00:03.0",)),
    # Intel VMD: a second domain whose host bridge sits below an endpoint of the first
    ("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
     ("10000:e0:06.0", "10000:e1:00.0")),
    ("/sys/devices/pci0000:00/0000:00:03.0/virtio2", ()),           # a virtio device's parent is not PCI
    ("/sys/devices/platform/HISI0361:00", ()),
    ("/sys/devices/virtual/infiniband/rxe0", ()),
])
def test_pci_chain_runs_from_the_root_port(path, chain):
    assert parse_pci_chain(path) == chain


def test_pci_bus_order_is_numeric():
    """Domains differ in width (Hyper-V picks 4-digit ones, VMD starts at 10000): text order is not bus order."""
    bdfs = ["10000:e1:00.0", "e3a1:00:02.0", "0000:9d:00.0", "0000:0a:00.1", "0000:0a:00.0"]
    assert sorted(bdfs, key=bdf_key) == ["0000:0a:00.0", "0000:0a:00.1", "0000:9d:00.0", "e3a1:00:02.0",
                                         "10000:e1:00.0"]


def test_held_file_follows_atomic_replace_and_removal(tmp_path):
    path = tmp_path / "port_xmit_data"
    path.write_text("1\n")
    files = HeldFiles()
    assert files.read(str(path)) == b"1\n"
    fd_count = len(files)
    tmp = tmp_path / ".tmp"
    tmp.write_text("2\n")
    os.replace(tmp, path)  # how writers replace a multi-line file
    files.new_scrape()
    assert files.read(str(path)) == b"2\n"
    path.unlink()
    files.new_scrape()
    assert files.read(str(path)) is None
    path.write_text("3\n")
    files.new_scrape()
    assert files.read(str(path)) == b"3\n"
    with open(path, "r+") as f:  # rewritten in place (how the simulator updates attributes)
        f.write("4\n")
    assert files.read(str(path)) == b"4\n"
    assert len(files) == fd_count
    files.close()
    assert len(files) == 0


def test_held_descriptor_rereads_live_sysfs_without_reopening():
    """The performance premise, on this machine's kernel: pread at offset 0 on a held sysfs descriptor
    returns the current value (loopback rx_packets moves as we send to ourselves)."""
    import socket
    path = "/sys/class/net/lo/statistics/rx_packets"
    if not os.path.exists(path):
        platform_lacks(f"{path} not present (no sysfs mounted in this environment)")
    files = HeldFiles()
    before = int(files.read(path))
    fd = files._held[path]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        for _ in range(5):
            tx.sendto(b"x", rx.getsockname())
            rx.recv(1)
    after = int(files.read(path))
    assert after >= before + 5
    assert files._held[path] == fd and not files._dirs  # held, not reopened; no directory to watch
    files.close()
