"""Discovery of RDMA devices under ``<sysfs>/class/infiniband``: their ports, which counter files each
port has, the static attributes read once, the netdevs behind each device and its rail.

Discovery runs at the first scrape and again whenever the device listing changes; per scrape the
collectors only read the files found here.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from exporters.fabric.sysfs import read_once

CLASS_DIR = ("class", "infiniband")
_NATURAL = re.compile(r"(\d+)")


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
    pci_address: str | None         # basename of the device/ link, when it points at a PCI function
    netdevs: tuple[str, ...]        # <device>/device/net/*
    ports: tuple[IbPort, ...]


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


def _pci_address(path: str) -> str | None:
    link = os.path.join(path, "device")
    if not os.path.islink(link):
        return None
    return os.path.basename(os.readlink(link)) or None


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
    return IbDevice(
        name, path, read_once(os.path.join(path, "board_id")), read_once(os.path.join(path, "fw_ver")),
        read_once(os.path.join(path, "hca_type")), _pci_address(path), netdevs,
        tuple(_port(name, os.path.join(ports_dir, p), p) for p in port_names))


def discover(sysfs: Path, names: tuple[str, ...] | None = None) -> tuple[IbDevice, ...]:
    found = (discover_device(sysfs, name) for name in (listing(sysfs) if names is None else names))
    return tuple(d for d in found if d is not None)


def rails(devices: tuple[IbDevice, ...]) -> dict[str, int]:
    """Rail of each device: its ordinal by PCI address (by natural name where sysfs shows no PCI link,
    as in simulated trees). Rail-optimized GPU nodes cable HCA k, the one next to GPU k, to rail k."""
    ordered = sorted(devices, key=lambda d: (d.pci_address or "", natural_key(d.name)))
    return {device.name: rail for rail, device in enumerate(ordered)}
