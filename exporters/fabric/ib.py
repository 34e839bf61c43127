"""Pure parsers for ``<sysfs>/class/infiniband/<device>/ports/<port>/``: ``state``, ``phys_state``, ``rate``
and the PMA counters in ``counters/`` and ``counters_ext/`` (kernel Documentation/ABI/stable/sysfs-class-infiniband),
with ``plan_counters`` deciding once per port which file serves each counter and how its number converts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

# Width in bits of each legacy PortCounters field as the kernel prints it (drivers/infiniband/core/sysfs.c,
# PORT_PMA_ATTR). IBA counters stop at all-ones instead of wrapping, so a value of 2^width-1 means "stopped".
# Kernels since 4.5 serve the data/packet files from PortCountersExtended (64 bits) when the HCA has them;
# a 64-bit counter sitting exactly on 2^32-1 is a one-scrape false alarm we accept.
WIDTHS: Mapping[str, int] = MappingProxyType({
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16, "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16, "port_xmit_data": 32, "port_rcv_data": 32,
    "port_xmit_packets": 32, "port_rcv_packets": 32, "port_xmit_wait": 32,
})
# Pre-4.5 kernels (and MLNX_OFED) put the 64-bit PortCountersExtended values in counters_ext/ under
# these names; each replaces the counters/ file it names.
EXT_REPLACES: Mapping[str, str] = MappingProxyType({
    "port_xmit_data_64": "port_xmit_data", "port_rcv_data_64": "port_rcv_data",
    "port_xmit_packets_64": "port_xmit_packets", "port_rcv_packets_64": "port_rcv_packets",
    "port_unicast_xmit_packets": "unicast_xmit_packets", "port_unicast_rcv_packets": "unicast_rcv_packets",
    "port_multicast_xmit_packets": "multicast_xmit_packets", "port_multicast_rcv_packets": "multicast_rcv_packets",
})
# port_xmit_data/port_rcv_data count 4-octet words (per lane): multiply by 4 for octets.
WORD_COUNTERS = frozenset({"port_xmit_data", "port_rcv_data"})
_NO_PMA = b"N/A"  # "N/A (no PMA)": the driver has no performance management agent (iWARP, some RoCE)
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")


@dataclass(frozen=True, slots=True)
class PortState:
    """``state`` / ``phys_state``: ``"4: ACTIVE"``, ``"5: LinkUp"``."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class CounterFile:
    """Where one port counter is read, and what its number means."""

    name: str                 # the counters/ file name, which identifies the counter
    file: str                 # the file serving it, relative to the port directory
    pinned: int | None        # 2^width-1: the value a legacy counter stops at; None for 64-bit files
    scale: int                # to octets or packets (4 for the data counters, which count words)
    fallback: CounterFile | None = None  # the counters/ file read when a counters_ext/ one has no value


def parse_state(text: str) -> PortState:
    """Parse ``state`` or ``phys_state`` (``"<id>: <NAME>"``); ValueError on anything else."""
    number, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"expected '<id>: <name>', got {text.strip()!r}")
    return PortState(int(number), name.strip())


def parse_rate(text: str) -> float:
    """Parse ``rate`` (``"400 Gb/sec (4X NDR)"``) into bytes per second; ValueError if unrecognised."""
    match = _RATE.match(text)
    if match is None:
        raise ValueError(f"expected '<n> Gb/sec ...', got {text.strip()!r}")
    return float(match.group(1)) * 1e9 / 8


def parse_counter(raw: bytes) -> int | None:
    """One counter file: its integer value, or None for ``N/A (no PMA)``; ValueError for garbage."""
    if raw.startswith(_NO_PMA):
        return None
    return int(raw)


def plan_counters(counters: Iterable[str], counters_ext: Iterable[str] = ()) -> tuple[CounterFile, ...]:
    """The files serving a port's counters, from the names present in ``counters/`` and ``counters_ext/``:
    a 64-bit ``counters_ext/`` file replaces the ``counters/`` file it names, which becomes its fallback.
    The replaced counters come first; each group keeps the order given."""
    legacy = {name: CounterFile(name, f"counters/{name}", _pinned(name), _scale(name)) for name in counters}
    replaced = tuple(CounterFile(EXT_REPLACES[name], f"counters_ext/{name}", None, _scale(EXT_REPLACES[name]),
                                 legacy.pop(EXT_REPLACES[name], None))
                     for name in counters_ext if name in EXT_REPLACES)
    return (*replaced, *legacy.values())


def _pinned(name: str) -> int | None:
    width = WIDTHS.get(name)
    return None if width is None else (1 << width) - 1


def _scale(name: str) -> int:
    return 4 if name in WORD_COUNTERS else 1
