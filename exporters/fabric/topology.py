"""Discovery of RDMA devices under ``<sysfs>/class/infiniband``: their ports, which counter files each
port has, the static attributes read once, the netdevs behind each device and its rail.

Discovery runs at the first scrape and again whenever the device listing changes; per scrape the
collectors only read the files found here.

The rail comes from the PCIe topology: rail-optimized GPU nodes put each compute HCA under the same PCIe
switch as one GPU (on a DGX H100 each ConnectX-7 shares a switch with one H100; the storage and in-band
NICs hang off root ports of their own) and cable the HCA next to GPU k to rail k.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from exporters.fabric.sysfs import read_once

CLASS_DIR = ("class", "infiniband")
PCI_DIR = ("bus", "pci", "devices")
_NATURAL = re.compile(r"(\d+)")
_BDF = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")   # domain:bus:device.function
_HOST_BRIDGE = re.compile(r"pci[0-9a-f]{4,}:[0-9a-f]{2}")           # /sys/devices/pci0000:00
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0302", "0x0300")  # 3D controller (A100, H100), VGA controller (workstation GPUs)
# A chain shared down to the port below the root port: the upstream port of a switch both sit under
# (the root port alone has one link, so two endpoints below it are always below such a switch).
SWITCH_DEPTH = 2


@dataclass(frozen=True, slots=True)
class IbPort:
    device: str
    port: str
    path: str                       # <sysfs>/class/infiniband/<device>/ports/<port>
    link_layer: str | None
    counters: tuple[str, ...]       # file names under counters/
    counters_ext: tuple[str, ...]   # file names under counters_ext/ (pre-4.5 kernels, OFED)
    hw_counters: tuple[str, ...]    # file names under hw_counters/ (RoCE, mlx5 and others)


@dataclass(frozen=True, slots=True)
class IbDevice:
    name: str
    path: str
    board_id: str | None
    firmware: str | None
    hca_type: str | None
    pci_address: str | None         # the PCI function the device/ link resolves to, if it is one
    pci_chain: tuple[str, ...]      # PCI functions from the root port down to pci_address
    netdevs: tuple[str, ...]        # <device>/device/net/*
    ports: tuple[IbPort, ...]
    rail: int | None = None         # set by discover(), which sees every device and GPU


def natural_key(name: str) -> tuple:
    """``mlx5_10`` after ``mlx5_9``."""
    return tuple(int(part) if part.isdigit() else part for part in _NATURAL.split(name))


@functools.lru_cache(maxsize=16)
def class_dir(sysfs: Path) -> str:
    return str(sysfs.joinpath(*CLASS_DIR))


def listing(sysfs: Path) -> tuple[str, ...]:
    """The device names present now (cheap: one directory read per scrape)."""
    try:
        return _natural_order(tuple(os.listdir(class_dir(sysfs))))
    except FileNotFoundError:
        return ()


@functools.lru_cache(maxsize=16)
def _natural_order(names: tuple[str, ...]) -> tuple[str, ...]:
    # Two collectors list the devices every scrape; the regex sort key only runs when the listing changes.
    return tuple(sorted(names, key=natural_key))


def _files(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(e.name for e in os.scandir(path) if e.is_file()))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return ()


def _port(device: str, path: str, port: str) -> IbPort:
    return IbPort(device, port, path, read_once(os.path.join(path, "link_layer")),
                  _files(os.path.join(path, "counters")), _files(os.path.join(path, "counters_ext")),
                  _files(os.path.join(path, "hw_counters")))


def parse_pci_chain(path: str) -> tuple[str, ...]:
    """The PCI functions from the root port down to the one a resolved sysfs path names:
    ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` gives ``("0000:00:01.0", "0000:01:00.0")``;
    () when the path does not end at a PCI function (a virtio or platform parent)."""
    chain: list[str] = []
    for part in reversed(path.split(os.sep)):
        if _HOST_BRIDGE.fullmatch(part):  # the last one: VMD nests a domain below another's endpoint
            return tuple(reversed(chain))
        if not _BDF.fullmatch(part):
            return ()
        chain.append(part)
    return ()


def _pci_chain(link: str) -> tuple[str, ...]:
    try:
        target = os.readlink(link)
    except OSError:  # not a link (simulated trees) or gone
        return ()
    return _resolved_chain(link, target)


@functools.lru_cache(maxsize=256)
def _resolved_chain(link: str, target: str) -> tuple[str, ...]:
    # realpath walks every component (~60 µs a link on sysfs); the target names the PCI function, so
    # periodic rediscovery resolves a link again only when it points elsewhere.
    return parse_pci_chain(os.path.realpath(link))


def bdf_key(bdf: str) -> tuple[int, ...]:
    """PCI bus order: (domain, bus, device, function) as numbers."""
    return tuple(int(part, 16) for part in re.split(r"[:.]", bdf))


def discover_device(sysfs: Path, name: str) -> IbDevice | None:
    """Everything static about one device; None if it vanished while we looked."""
    path = os.path.join(class_dir(sysfs), name)
    if not os.path.isdir(path):
        return None
    ports_dir = os.path.join(path, "ports")
    try:
        port_names = sorted(os.listdir(ports_dir), key=natural_key)
    except (FileNotFoundError, NotADirectoryError):
        port_names = []
    try:
        netdevs = tuple(sorted(os.listdir(os.path.join(path, "device", "net"))))
    except OSError:
        netdevs = ()
    chain = _pci_chain(os.path.join(path, "device"))
    return IbDevice(
        name, path, read_once(os.path.join(path, "board_id")), read_once(os.path.join(path, "fw_ver")),
        read_once(os.path.join(path, "hca_type")), chain[-1] if chain else None, chain, netdevs,
        tuple(_port(name, os.path.join(ports_dir, p), p) for p in port_names))


def discover(sysfs: Path, names: tuple[str, ...] | None = None) -> tuple[IbDevice, ...]:
    found = (discover_device(sysfs, name) for name in (listing(sysfs) if names is None else names))
    devices = tuple(d for d in found if d is not None)
    # Where no device shares a switch with a GPU (no GPU in sysfs; or a VM whose hypervisor presents
    # a flat PCI bus, e.g. Hyper-V), the topology tells nothing: the ordinal rule applies.
    rail = _switch_rails(devices, gpu_chains(sysfs)) or _ordinal_rails(devices)
    return tuple(dataclasses.replace(d, rail=rail.get(d.name)) for d in devices)


def gpu_chains(sysfs: Path) -> tuple[tuple[str, ...], ...]:
    """The PCI chain of each NVIDIA GPU under ``<sysfs>/bus/pci/devices``, in PCI bus order: NVML's
    (and nvidia-smi's) default index order. Its files are read again only when the listing changes."""
    pci_dir = str(sysfs.joinpath(*PCI_DIR))
    try:
        return _gpu_chains(pci_dir, tuple(os.listdir(pci_dir)))
    except OSError:
        return ()


@functools.lru_cache(maxsize=16)
def _gpu_chains(pci_dir: str, functions: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    chains = []
    for function in sorted((f for f in functions if _BDF.fullmatch(f)), key=bdf_key):
        path = os.path.join(pci_dir, function)
        # Vendor first: only NVIDIA functions (GPUs, NVSwitches) have their class read.
        if read_once(os.path.join(path, "vendor")) == NVIDIA and \
                (read_once(os.path.join(path, "class")) or "").startswith(GPU_CLASSES):
            chains.append(_pci_chain(path))
    return tuple(chains)


def _shared_depth(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    depth = 0
    for x, y in zip(a, b):
        if x != y:
            break
        depth += 1
    return depth


def _switch_rails(devices: tuple[IbDevice, ...], gpus: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    """(Empty without GPUs.) The index of the GPU below the deepest PCIe switch a device shares with any GPU; no rail for a
    device that shares none (a storage NIC on its own root port). Devices tied to several GPUs (one
    switch holding two GPUs and two HCAs) are spread over them in PCI order; the functions of one card
    next to one GPU all take its rail."""
    tied: dict[tuple[int, ...], list[IbDevice]] = {}
    for device in devices:
        depths = [_shared_depth(device.pci_chain, gpu) for gpu in gpus]
        deepest = max(depths, default=0)
        if deepest >= SWITCH_DEPTH:
            tied.setdefault(tuple(i for i, d in enumerate(depths) if d == deepest), []).append(device)
    rail = {}
    for candidates, group in tied.items():
        group.sort(key=lambda d: bdf_key(d.pci_address))
        for i, device in enumerate(group):
            rail[device.name] = candidates[i * len(candidates) // len(group)]
    return rail


def _ordinal_rails(devices: tuple[IbDevice, ...]) -> dict[str, int]:
    """No device next to a GPU (simulated trees, fixtures, nodes without GPUs, flat VM buses): the
    ordinal by PCI address, or by natural name where no device has a PCI link. A device without one beside devices with one (a
    software RDMA device) is on no rail rather than shifting every HCA by one."""
    linked = [d for d in devices if d.pci_address]
    if linked:
        ordered = sorted(linked, key=lambda d: (bdf_key(d.pci_address), natural_key(d.name)))
    else:
        ordered = sorted(devices, key=lambda d: natural_key(d.name))
    return {device.name: rail for rail, device in enumerate(ordered)}


def rails(devices: tuple[IbDevice, ...]) -> dict[str, str]:
    """The rail label of each device: its rail, or empty where it is on none."""
    return {device.name: "" if device.rail is None else str(device.rail) for device in devices}
