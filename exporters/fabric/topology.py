"""Discovery of RDMA devices under ``<sysfs>/class/infiniband``: their ports, which counter files each
port has, the static attributes read once, the netdevs behind each device, the PCI chain it hangs from
and its rail (inferred by ``rails`` from those chains and the GPUs' under ``<sysfs>/bus/pci/devices``).

Discovery runs at the first scrape and again whenever the device listing changes; per scrape the
collectors only read the files found here.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.fabric.pci import BDF, bdf_key, parse_pci_chain
from lockstep.exporters.fabric.rails import infer
from lockstep.exporters.fabric.sysfs import read_once

CLASS_DIR = ("class", "infiniband")
PCI_DIR = ("bus", "pci", "devices")
_NATURAL = re.compile(r"(\d+)")
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0302", "0x0300")  # 3D controller (A100, H100), VGA controller (workstation GPUs)
MAX_LINKS = 256  # resolved links remembered per tree: a node has tens; the bound only guards against churn


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


class _Remembered:
    """What discovery keeps of one sysfs tree between calls. Each entry is a result with the input it came
    from, computed again only when that input changes:
    - the device listing in natural order: two collectors list the devices every scrape, and the regex
      sort key runs only when the listing changes;
    - each link's PCI chain while the link points at the same target: realpath walks every component
      (~60 µs a link on sysfs), and periodic rediscovery would resolve every link again;
    - the GPUs' PCI chains while ``bus/pci/devices`` lists the same functions.
    """

    def __init__(self, sysfs: Path) -> None:
        self.class_dir = str(sysfs.joinpath(*CLASS_DIR))
        self.pci_dir = str(sysfs.joinpath(*PCI_DIR))
        self._order: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._chains: dict[str, tuple[str, tuple[str, ...]]] = {}  # link -> (its target, its chain)
        self._gpus: tuple[tuple[str, ...] | None, tuple[tuple[str, ...], ...]] = (None, ())

    def natural_order(self, names: tuple[str, ...]) -> tuple[str, ...]:
        known, ordered = self._order
        if names != known:
            ordered = tuple(sorted(names, key=natural_key))
            self._order = (names, ordered)
        return ordered

    def chain(self, link: str) -> tuple[str, ...]:
        try:
            target = os.readlink(link)
        except OSError:  # not a link (simulated trees) or gone
            return ()
        known = self._chains.get(link)
        if known is None or known[0] != target:
            if len(self._chains) >= MAX_LINKS:
                self._chains.clear()
            known = self._chains[link] = (target, parse_pci_chain(os.path.realpath(link)))
        return known[1]

    def gpu_chains(self, functions: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        known, chains = self._gpus
        if functions != known:
            chains = tuple(self.chain(path) for path in self._gpu_functions(functions))
            self._gpus = (functions, chains)
        return chains

    def _gpu_functions(self, functions: tuple[str, ...]) -> list[str]:
        found = []
        for function in sorted((f for f in functions if BDF.fullmatch(f)), key=bdf_key):
            path = os.path.join(self.pci_dir, function)
            # Vendor first: only NVIDIA functions (GPUs, NVSwitches) have their class read.
            if read_once(os.path.join(path, "vendor")) == NVIDIA and \
                    (read_once(os.path.join(path, "class")) or "").startswith(GPU_CLASSES):
                found.append(path)
        return found


@functools.lru_cache(maxsize=16)
def _remembered(sysfs: Path) -> _Remembered:
    return _Remembered(sysfs)


def class_dir(sysfs: Path) -> str:
    return _remembered(sysfs).class_dir


def listing(sysfs: Path) -> tuple[str, ...]:
    """The device names present now (cheap: one directory read per scrape)."""
    return class_listing(sysfs) or ()


def class_listing(sysfs: Path) -> tuple[str, ...] | None:
    """``listing``, or None when the class directory itself is absent (no RDMA core driver loaded)."""
    tree = _remembered(sysfs)
    try:
        return tree.natural_order(tuple(os.listdir(tree.class_dir)))
    except (FileNotFoundError, NotADirectoryError):
        return None


def gpu_chains(sysfs: Path) -> tuple[tuple[str, ...], ...]:
    """The PCI chain of each NVIDIA GPU under ``<sysfs>/bus/pci/devices``, in PCI bus order: NVML's
    (and nvidia-smi's) default index order. Its files are read again only when the listing changes."""
    tree = _remembered(sysfs)
    try:
        return tree.gpu_chains(tuple(os.listdir(tree.pci_dir)))
    except OSError:
        return ()


def _files(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(e.name for e in os.scandir(path) if e.is_file()))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return ()


def _port(device: str, path: str, port: str) -> IbPort:
    return IbPort(device, port, path, read_once(os.path.join(path, "link_layer")),
                  _files(os.path.join(path, "counters")), _files(os.path.join(path, "counters_ext")),
                  _files(os.path.join(path, "hw_counters")))


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
    chain = _remembered(sysfs).chain(os.path.join(path, "device"))
    return IbDevice(
        name, path, read_once(os.path.join(path, "board_id")), read_once(os.path.join(path, "fw_ver")),
        read_once(os.path.join(path, "hca_type")), chain[-1] if chain else None, chain, netdevs,
        tuple(_port(name, os.path.join(ports_dir, p), p) for p in port_names))


def discover(sysfs: Path, names: tuple[str, ...] | None = None) -> tuple[IbDevice, ...]:
    found = (discover_device(sysfs, name) for name in (listing(sysfs) if names is None else names))
    devices = tuple(d for d in found if d is not None)
    rail = infer(sorted(devices, key=lambda d: natural_key(d.name)), gpu_chains(sysfs))
    return tuple(dataclasses.replace(d, rail=rail.get(d.name)) for d in devices)


def rails(devices: tuple[IbDevice, ...]) -> dict[str, str]:
    """The rail label of each device: its rail, or empty where it is on none."""
    return {device.name: "" if device.rail is None else str(device.rail) for device in devices}
