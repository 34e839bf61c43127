"""Pure parsers of two infiniband-diags tools (rdma-core ``infiniband-diags/``): ``ibnetdiscover -p``
(``--ports``: one line per port of the subnet with its link partner) and ``perfquery -x`` / ``perfquery``
(the PortCountersExtended and PortCounters blocks, one per port with ``-l``). A line or block that
does not read loses that item alone; output with nothing readable at all is an ``IbDiagError``."""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

NODE_KINDS = {"SW": "switch", "CA": "ca", "RT": "router"}
# Nominal per-lane signalling rate in Gb/s of each speed name ibnetdiscover prints (libibmad's
# mad_dump_linkspeed names; the same figures the kernel's sysfs ``rate`` shows: 4X EDR is 100 Gb/sec).
LANE_GBPS: Mapping[str, float] = MappingProxyType({
    "SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0, "HDR": 50.0,
    "NDR": 100.0, "XDR": 200.0})
_END = r"(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]{1,16})"
_LINKED = re.compile(rf"^{_END}\s+(\S+)\s+(\S+)\s+-\s+{_END}\s+\(\s*'(.*?)'\s+-\s+'(.*)'\s*\)\s*$", re.ASCII)
_ALONE = re.compile(rf"^{_END}\s+(\S+)\s+(\S+)\s+(.*?)\s*$", re.ASCII)
_WIDTH = re.compile(r"^(\d{1,2})x$", re.IGNORECASE | re.ASCII)
_HEADER = re.compile(r"^# Port (extended )?counters: Lid (\d+) port (\d+)\b", re.ASCII)
_FIELD = re.compile(r"^([A-Za-z0-9]+):\.*(0x[0-9a-fA-F]+|\d+)\s*$", re.ASCII)
# What infiniband-diags prints when the host has no usable InfiniBand port (no umad device, or only
# RoCE ports): tests/fixtures/infiniband-diags/local/, captured from infiniband-diags 44.0.
NO_IB_MARKERS = ("can't open UMAD port", "can't open MAD port", "Failed to open '")
_MAX_COUNTER = 2 ** 64 - 1


class IbDiagError(ValueError):
    """Output that is not what the tool prints."""


@dataclass(frozen=True, slots=True)
class PortEnd:
    kind: str    # switch | ca | router
    lid: int
    port: int
    guid: str    # node GUID, 0x and 16 lower-case hex digits
    name: str    # node description ("o0001 HCA-1", "ib-i1l1s01"), surrounding blanks stripped


@dataclass(frozen=True, slots=True)
class DiscoveredPort:
    local: PortEnd
    width: int | None         # active lanes (4 for "4x"); None where not printed as a width
    speed: str | None         # active speed name (EDR, HDR, NDR); None for "???"
    remote: PortEnd | None    # the link partner; None for a port without one

    @property
    def rate_bits_per_second(self) -> float | None:
        """Nominal signalling rate of the link (width × lane rate)."""
        if self.width is None or self.speed not in LANE_GBPS:
            return None
        return self.width * LANE_GBPS[self.speed] * 1e9


@dataclass(frozen=True, slots=True)
class Fabric:
    ports: tuple[DiscoveredPort, ...]
    unreadable_lines: int = 0


@dataclass(frozen=True, slots=True)
class PortCounters:
    lid: int
    port: int
    extended: bool                 # from a "Port extended counters" block (perfquery -x)
    values: Mapping[str, int]      # perfquery's field names; data counters already in octets


def _guid(text: str) -> str:
    return f"0x{int(text, 16):016x}"


def _end(kind: str, lid: str, port: str, guid: str, name: str) -> PortEnd:
    return PortEnd(NODE_KINDS[kind], int(lid), int(port), _guid(guid), name.strip())


def _width(text: str) -> int | None:
    match = _WIDTH.match(text)
    return int(match.group(1)) if match else None


def _speed(text: str) -> str | None:
    return text.upper() if text.upper() in LANE_GBPS else None


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "'" else text


def parse_line(line: str) -> DiscoveredPort | None:
    """One line of ``ibnetdiscover -p``; None for a line that is not a port."""
    linked = _LINKED.match(line)
    if linked:
        g = linked.groups()
        return DiscoveredPort(_end(*g[0:4], g[10]), _width(g[4]), _speed(g[5]), _end(*g[6:10], g[11]))
    alone = _ALONE.match(line)
    if alone:
        g = alone.groups()
        return DiscoveredPort(_end(*g[0:4], _unquote(g[6])), _width(g[4]), _speed(g[5]), None)
    return None


def parse_ibnetdiscover(text: str) -> Fabric:
    """``ibnetdiscover -p`` output (rdma-core ``infiniband-diags/ibnetdiscover.c``, ports report)."""
    ports, unreadable = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        port = parse_line(line)
        if port is None:
            unreadable += 1
        else:
            ports.append(port)
    if unreadable and not ports:
        raise IbDiagError(f"no line reads as an ibnetdiscover -p port ({unreadable} lines)")
    return Fabric(tuple(ports), unreadable)


def _value(text: str) -> int | None:
    value = int(text, 16) if text.startswith("0x") else int(text)
    return value if value <= _MAX_COUNTER else None


# PortXmitData/PortRcvData count 4-octet words (IBA PortCounters/PortCountersExtended): × 4 for octets.
WORD_FIELDS = frozenset({"PortXmitData", "PortRcvData"})


def parse_perfquery(text: str) -> tuple[PortCounters, ...]:
    """``perfquery [-x] [-l] -G GUID PORTS`` output (rdma-core ``infiniband-diags/perfquery.c``): one
    block per port, a ``# Port [extended ]counters: Lid L port P`` header and ``Name:....value`` lines.
    A block with a malformed line keeps its other fields; lines outside any block are ignored."""
    blocks: list[PortCounters] = []
    header: tuple[int, int, bool] | None = None
    values: dict[str, int] = {}
    seen = False
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            if header is not None:
                blocks.append(PortCounters(header[0], header[1], header[2], MappingProxyType(values)))
            header, values, seen = (int(match.group(2)), int(match.group(3)), bool(match.group(1))), {}, True
            continue
        field = _FIELD.match(line.strip())
        if header is None or field is None:
            continue
        value = _value(field.group(2))
        if value is not None:
            values[field.group(1)] = value * 4 if field.group(1) in WORD_FIELDS else value
    if header is not None:
        blocks.append(PortCounters(header[0], header[1], header[2], MappingProxyType(values)))
    if not seen and text.strip():
        raise IbDiagError("no '# Port counters' block in perfquery output")
    return tuple(blocks)


def no_infiniband(output: str) -> bool:
    """True when a tool's output says the host has no usable InfiniBand port (a host without HCAs, or
    a RoCE-only one): a fact about the host to log once, not an error per sweep."""
    return any(marker in output for marker in NO_IB_MARKERS)
