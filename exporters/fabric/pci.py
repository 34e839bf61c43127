"""PCI addresses as sysfs writes them: a function's ``domain:bus:device.function`` (BDF), its bus order,
and the chain of functions from a root port down to it that a resolved ``/sys/devices`` path spells."""
from __future__ import annotations

import os
import re

BDF = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")   # domain:bus:device.function
_HOST_BRIDGE = re.compile(r"pci[0-9a-f]{4,}:[0-9a-f]{2}")          # /sys/devices/pci0000:00


def bdf_key(bdf: str) -> tuple[int, ...]:
    """PCI bus order: (domain, bus, device, function) as numbers."""
    return tuple(int(part, 16) for part in re.split(r"[:.]", bdf))


def parse_pci_chain(path: str) -> tuple[str, ...]:
    """The PCI functions from the root port down to the one a resolved sysfs path names:
    ``/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0`` gives ``("0000:00:01.0", "0000:01:00.0")``;
    () when the path does not end at a PCI function (a virtio or platform parent)."""
    chain: list[str] = []
    for part in reversed(path.split(os.sep)):
        if _HOST_BRIDGE.fullmatch(part):  # the last one: VMD nests a domain below another's endpoint
            return tuple(reversed(chain))
        if not BDF.fullmatch(part):
            return ()
        chain.append(part)
    return ()
