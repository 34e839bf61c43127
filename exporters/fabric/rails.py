"""Which rail each RDMA device is cabled to, inferred from the PCIe topology.

Rail-optimized GPU nodes put each compute HCA under the same PCIe switch as one GPU (on a DGX H100 each
ConnectX-7 shares a switch with one H100; the storage and in-band NICs hang off root ports of their own)
and cable the HCA next to GPU k to rail k. Where no device shares a switch with a GPU (no GPU in sysfs;
or a VM whose hypervisor presents a flat PCI bus, e.g. Hyper-V), the topology tells nothing: the devices'
ordinals apply.

Pure: ``topology`` reads the PCI chains at discovery; this module only compares them.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from lockstep.exporters.fabric.pci import bdf_key

# A chain shared down to the port below the root port: the upstream port of a switch both sit under
# (the root port alone has one link, so two endpoints below it are always below such a switch).
SWITCH_DEPTH = 2


class Attached(Protocol):
    """What inference reads of a device (``topology.IbDevice``)."""

    @property
    def name(self) -> str: ...

    @property
    def pci_address(self) -> str | None: ...

    @property
    def pci_chain(self) -> tuple[str, ...]: ...


def infer(devices: Sequence[Attached], gpus: Sequence[tuple[str, ...]]) -> dict[str, int]:
    """The rail of each device on one, by name. ``devices`` in natural name order (which breaks the
    ordinal rule's ties); ``gpus``: each GPU's PCI chain in PCI bus order, NVML's index order."""
    return by_switch(devices, gpus) or by_ordinal(devices)


def _shared_depth(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    depth = 0
    for x, y in zip(a, b):
        if x != y:
            break
        depth += 1
    return depth


def by_switch(devices: Sequence[Attached], gpus: Sequence[tuple[str, ...]]) -> dict[str, int]:
    """(Empty without GPUs.) The index of the GPU below the deepest PCIe switch a device shares with any
    GPU; no rail for a device that shares none (a storage NIC on its own root port). Devices tied to
    several GPUs (one switch holding two GPUs and two HCAs) are spread over them in PCI order; the
    functions of one card next to one GPU all take its rail."""
    tied: dict[tuple[int, ...], list[Attached]] = {}
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


def by_ordinal(devices: Sequence[Attached]) -> dict[str, int]:
    """No device next to a GPU (simulated trees, fixtures, nodes without GPUs, flat VM buses): the ordinal
    by PCI address, or in the given (natural name) order where no device has a PCI link. A device without
    one beside devices with one (a software RDMA device) is on no rail rather than shifting every HCA by one."""
    linked = [d for d in devices if d.pci_address]
    # sorted() is stable: devices at one address (none on real hardware) keep their name order.
    ordered = sorted(linked, key=lambda d: bdf_key(d.pci_address)) if linked else devices
    return {device.name: rail for rail, device in enumerate(ordered)}
