"""Pure parsers for ``<sysfs>/class/infiniband/<device>/ports/<port>/``: ``state``, ``phys_state``, ``rate``
and the PMA counters in ``counters/`` and ``counters_ext/`` (kernel Documentation/ABI/stable/sysfs-class-infiniband).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

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
class PortCounters:
    """Counter values keyed by their ``counters/`` file name, data in octets; ``saturated`` lists the
    legacy counters pinned at their maximum and ``malformed`` the files that did not parse (both
    withheld from ``values``)."""

    values: Mapping[str, int]
    saturated: tuple[str, ...] = ()
    malformed: tuple[str, ...] = ()


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


def parse_port_counters(counters: Mapping[str, bytes | None],
                        counters_ext: Mapping[str, bytes | None] = MappingProxyType({})) -> PortCounters:
    """Combine the raw contents of ``counters/<name>`` and ``counters_ext/<name>`` (None = unreadable)
    into octets and packets, preferring 64-bit values and withholding saturated legacy counters."""
    values: dict[str, int] = {}
    malformed: list[str] = []
    for name, raw in counters_ext.items():
        value = _value(raw, "counters_ext/" + name, malformed)
        if value is not None and name in EXT_REPLACES:
            values[EXT_REPLACES[name]] = value
    saturated = []
    for name, raw in counters.items():
        if name in values:
            continue
        value = _value(raw, "counters/" + name, malformed)
        if value is None:
            continue
        width = WIDTHS.get(name)
        if width is not None and value == (1 << width) - 1:
            saturated.append(name)
            continue
        values[name] = value
    for name in WORD_COUNTERS & values.keys():
        values[name] *= 4
    return PortCounters(values, tuple(sorted(saturated)), tuple(malformed))


def _value(raw: bytes | None, name: str, malformed: list[str]) -> int | None:
    if raw is None:
        return None
    try:
        return parse_counter(raw)
    except ValueError:
        malformed.append(name)
        return None
