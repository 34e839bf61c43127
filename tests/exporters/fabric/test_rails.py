"""Rails from the PCIe topology: an HCA's rail is the index of the GPU below the PCIe switch it shares.

The trees here are synthetic, built in tmp_path in the shape Linux gives sysfs: functions nested under
``devices/pci<domain>:<bus>/`` by the bridges above them, ``bus/pci/devices/<bdf>`` and
``class/infiniband/<dev>`` as relative symlinks into ``devices/``, ``<dev>/device`` pointing back at the
PCI function. The main one is modelled on a DGX H100 layout: eight GPUs (at the bus numbers nvidia-smi
shows on one) each sharing a PCIe switch with one ConnectX-7, storage and in-band NICs on root ports of
their own, NVSwitches and a BMC VGA function that are not GPUs.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lockstep.exporters.collectors.infiniband import InfinibandCollector, InfinibandOptions
from lockstep.exporters.fabric import topology
from lockstep.exporters.toolkit.exposition import Encoder, render_text

BRIDGE, GPU_3D, GPU_VGA, NVSWITCH, HCA, BMC_VGA = (
    ("0x1000", "0x060400"), ("0x10de", "0x030200"), ("0x10de", "0x030000"), ("0x10de", "0x068000"),
    ("0x15b3", "0x020700"), ("0x1a03", "0x030000"))


def pci(root: Path, path: str, kind: tuple[str, str]) -> Path:
    """The function at ``devices/<path>`` (host bridge first, e.g. ``pci0000:18/0000:18:01.0/...``), the
    bridges above it and its ``bus/pci/devices`` link."""
    parts = path.split("/")
    for depth in range(2, len(parts) + 1):
        directory = root / "devices" / "/".join(parts[:depth])
        directory.mkdir(parents=True, exist_ok=True)
        vendor, klass = kind if depth == len(parts) else BRIDGE
        if not (directory / "vendor").exists():
            (directory / "vendor").write_text(f"{vendor}\n")
            (directory / "class").write_text(f"{klass}\n")
        bus = root / "bus/pci/devices"
        bus.mkdir(parents=True, exist_ok=True)
        if not (bus / parts[depth - 1]).is_symlink():
            (bus / parts[depth - 1]).symlink_to(Path("../../../devices", *parts[:depth]))
    return root / "devices" / path


def hca(root: Path, name: str, path: str, netdev: str | None = None) -> None:
    function = pci(root, path, HCA)
    device = function / "infiniband" / name
    (device / "ports/1").mkdir(parents=True)
    (device / "ports/1/link_layer").write_text("InfiniBand\n")
    (device / "hca_type").write_text("MT4129\n")
    (device / "device").symlink_to(Path("../../..", function.name))
    if netdev:
        (function / "net" / netdev).mkdir(parents=True)
        (function / "net" / netdev / "ifindex").write_text("4\n")
    (root / "class/infiniband").mkdir(parents=True, exist_ok=True)
    (root / "class/infiniband" / name).symlink_to(Path("../../devices", path, "infiniband", name))


def switch_pair(root: Path, bus: int, gpu_bus: int, name: str) -> None:
    """Root port -> switch upstream port -> one downstream port each for a GPU and an HCA."""
    down = f"pci0000:{bus:02x}/0000:{bus:02x}:01.0/0000:{bus + 1:02x}:00.0"
    pci(root, f"{down}/0000:{bus + 2:02x}:00.0/0000:{gpu_bus:02x}:00.0", GPU_3D)
    hca(root, name, f"{down}/0000:{bus + 2:02x}:01.0/0000:{bus + 4:02x}:00.0", f"ibp{bus + 4}s0")


DGX_GPU_BUSES = (0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF)
DGX_COMPUTE = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")


@pytest.fixture
def dgx(tmp_path) -> Path:
    root = tmp_path / "sys"
    pci(root, "pci0000:00/0000:00:1c.0/0000:03:00.0", BMC_VGA)  # lowest bus: would be GPU 0 if counted
    for i in range(4):
        pci(root, f"pci0000:00/0000:00:1d.0/0000:04:00.0/0000:05:0{i}.0/0000:0{6 + i}:00.0", NVSWITCH)
    for gpu_bus, name in zip(DGX_GPU_BUSES, DGX_COMPUTE):
        switch_pair(root, gpu_bus - 3, gpu_bus, name)
    # Storage: a dual-port card on its own root port, between GPU 0's bus and GPU 1's.
    hca(root, "mlx5_1", "pci0000:29/0000:29:01.0/0000:2a:00.0", "enp42s0f0np0")
    hca(root, "mlx5_2", "pci0000:29/0000:29:01.0/0000:2a:00.1", "enp42s0f1np1")
    # In-band: another root port of the host bridge GPU 4 hangs off, so sharing that is not enough.
    hca(root, "mlx5_7", "pci0000:9a/0000:9a:05.0/0000:a0:00.0", "enp160s0f0np0")
    hca(root, "mlx5_8", "pci0000:9a/0000:9a:05.0/0000:a0:00.1", "enp160s0f1np1")
    return root


def rails(root: Path) -> dict[str, str]:
    return topology.rails(topology.discover(root))


def test_compute_hcas_take_their_gpus_index_and_storage_nics_no_rail(dgx):
    assert rails(dgx) == {**{name: str(gpu) for gpu, name in enumerate(DGX_COMPUTE)},
                          "mlx5_1": "", "mlx5_2": "", "mlx5_7": "", "mlx5_8": ""}


def test_rail_info_has_an_empty_rail_for_a_nic_next_to_no_gpu(dgx):
    collector = InfinibandCollector(InfinibandOptions(dgx))
    families: dict = {}
    Encoder().add(families, collector.collect())
    collector.close()
    text = render_text(families)
    assert 'lockstep_fabric_rail_info{device="mlx5_3",interface="ibp68s0",rail="1"} 1' in text
    assert 'lockstep_fabric_rail_info{device="mlx5_1",interface="enp42s0f0np0",rail=""} 1' in text


def test_gpus_are_numbered_in_pci_bus_order_including_vga_class(tmp_path):
    root = tmp_path / "sys"
    pci(root, "pci0000:00/0000:00:01.0/0000:01:00.0", GPU_3D)  # GPU 0, with no HCA near it
    switch_pair(root, 0x80, 0x83, "mlx5_0")       # listed first by name, last GPU by bus
    switch_pair(root, 0x10, 0x13, "mlx5_1")
    root_vga = "pci0000:40/0000:40:01.0/0000:41:00.0"  # a workstation GPU is a VGA controller
    pci(root, f"{root_vga}/0000:42:00.0/0000:43:00.0", GPU_VGA)
    hca(root, "mlx5_2", f"{root_vga}/0000:42:01.0/0000:44:00.0")
    assert rails(root) == {"mlx5_1": "1", "mlx5_2": "2", "mlx5_0": "3"}


def test_deepest_shared_switch_decides(tmp_path):
    """Two GPUs under one switch, each behind a second-level switch; the HCA sits in GPU 1's."""
    root = tmp_path / "sys"
    top = "pci0000:10/0000:10:01.0/0000:11:00.0"
    pci(root, f"{top}/0000:12:00.0/0000:13:00.0/0000:14:00.0/0000:15:00.0", GPU_3D)
    pci(root, f"{top}/0000:12:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", GPU_3D)
    hca(root, "mlx5_0", f"{top}/0000:12:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0")
    assert rails(root) == {"mlx5_0": "1"}


def test_hcas_tied_to_several_gpus_are_spread_in_pci_order(tmp_path):
    """One switch with two GPUs and two HCAs on sibling ports (DGX A100-like): nothing closer decides."""
    root = tmp_path / "sys"
    pci(root, "pci0000:00/0000:00:01.0/0000:01:00.0", GPU_3D)  # GPU 0, with no HCA near it
    up = "pci0000:10/0000:10:01.0/0000:11:00.0"
    for port, bus in ((0, 0x13), (1, 0x14)):
        pci(root, f"{up}/0000:12:0{port}.0/0000:{bus:02x}:00.0", GPU_3D)
    hca(root, "mlx5_0", f"{up}/0000:12:03.0/0000:16:00.0")
    hca(root, "mlx5_1", f"{up}/0000:12:02.0/0000:15:00.0")
    assert rails(root) == {"mlx5_0": "2", "mlx5_1": "1"}


def test_both_functions_of_a_card_next_to_one_gpu_share_its_rail(tmp_path):
    root = tmp_path / "sys"
    switch_pair(root, 0x10, 0x13, "mlx5_0")
    down = "pci0000:20/0000:20:01.0/0000:21:00.0"
    pci(root, f"{down}/0000:22:00.0/0000:23:00.0", GPU_3D)
    hca(root, "mlx5_1", f"{down}/0000:22:01.0/0000:24:00.0")
    hca(root, "mlx5_2", f"{down}/0000:22:01.0/0000:24:00.1")
    assert rails(root) == {"mlx5_0": "0", "mlx5_1": "1", "mlx5_2": "1"}


def test_without_gpus_rails_are_ordinals_of_the_pci_linked_devices(tmp_path):
    """No GPU in sysfs: the old ordinal by PCI address, but a device with no PCI function behind it
    (software RDMA) is on no rail instead of taking rail 0 and shifting every HCA."""
    root = tmp_path / "sys"
    hca(root, "mlx5_0", "pci0000:30/0000:30:01.0/0000:31:00.0")
    hca(root, "mlx5_1", "pci0000:10/0000:10:01.0/0000:11:00.0")
    soft = root / "devices/virtual/infiniband/rxe0"
    (soft / "ports/1").mkdir(parents=True)
    (root / "class/infiniband/rxe0").symlink_to("../../devices/virtual/infiniband/rxe0")
    assert rails(root) == {"mlx5_0": "1", "mlx5_1": "0", "rxe0": ""}


def test_a_flat_vm_bus_with_gpus_but_no_shared_switch_keeps_the_ordinals(tmp_path):
    """A hypervisor that presents every function on its own root port (no switch shared by a GPU and
    an HCA) says nothing about rails: the ordinal rule applies rather than no rail for every HCA."""
    root = tmp_path / "sys"
    for i in range(2):
        pci(root, f"pci0000:{0x40 + i:02x}/0000:{0x40 + i:02x}:00.0", GPU_3D)
        hca(root, f"mlx5_{i}", f"pci0000:{0x50 + i:02x}/0000:{0x50 + i:02x}:00.0")
    assert rails(root) == {"mlx5_0": "0", "mlx5_1": "1"}


def test_non_pci_parent_has_no_pci_address(tmp_path):
    root = tmp_path / "sys"
    device = root / "devices/platform/HISI0361:00/infiniband/hns_0"  # HiSilicon RoCE: a platform device
    (device / "ports/1").mkdir(parents=True)
    (device / "device").symlink_to("../../../HISI0361:00")
    (root / "class/infiniband").mkdir(parents=True)
    (root / "class/infiniband/hns_0").symlink_to("../../devices/platform/HISI0361:00/infiniband/hns_0")
    (found,) = topology.discover(root)
    assert (found.pci_address, found.pci_chain, found.rail) == (None, (), 0)


def test_gpus_are_looked_up_at_discovery_not_per_scrape(dgx, monkeypatch):
    calls = []
    real = topology.gpu_chains
    monkeypatch.setattr(topology, "gpu_chains", lambda sysfs: calls.append(sysfs) or real(sysfs))
    collector = InfinibandCollector(InfinibandOptions(dgx))
    for _ in range(3):
        list(collector.collect())
    collector.close()
    assert len(calls) == 1


def test_the_pci_listing_is_read_again_when_it_changes(dgx):
    assert rails(dgx)["mlx5_0"] == "0"
    pci(dgx, "pci0000:01/0000:01:01.0/0000:02:00.0", GPU_3D)  # a GPU on a lower bus than all others
    assert rails(dgx)["mlx5_0"] == "1"
