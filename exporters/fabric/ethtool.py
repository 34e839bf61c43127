"""Driver statistics of network interfaces behind one small Protocol, and the ``ethtool -S`` text parser.

Two sources implement ``Ethtool``: ``ethtool_ioctl.IoctlEthtool`` (the real NIC, through SIOCETHTOOL) and
``DirEthtool`` here, which reads ``<dir>/<iface>/statistics`` files holding ``ethtool -S <iface>`` output
(what ``lockstep sim run`` writes) and ``<dir>/<iface>/driver``: the driver name on one line, or the
whole ``ethtool -i <iface>`` output saved as it is.
What the statistics mean is the reader's business (``pfc_table`` for the pfc collector), not this module's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Callable, Protocol, Sequence

from lockstep.exporters.numbers import U64_DIGITS, is_uint
from lockstep.exporters.readfile import read_text

_HEADER = "NIC statistics:"
_HEADER_TOKENS = _HEADER.split()


@dataclass(frozen=True, slots=True)
class NicStats:
    """One interface's driver statistics: parallel ``names`` and ``values`` (ETH_SS_STATS order)."""

    interface: str
    driver: str | None
    names: tuple[str, ...]
    values: Sequence[int]


class Ethtool(Protocol):
    def interfaces(self) -> list[str]:
        """Interfaces this source can read, sorted."""

    def stats(self, interface: str) -> NicStats | None:
        """Current statistics of ``interface``; None if it is gone or has none."""

    def forget(self, interface: str) -> None:
        """Drop what is cached for an interface that is gone (names churn: VFs, veths)."""

    def close(self) -> None: ...


def parse_ethtool_stats(text: str, source: str = "<ethtool -S>") -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``ethtool -S`` output (``NIC statistics:`` then ``     name: value`` lines) into names and
    values; ValueError naming ``source`` and the line for anything else."""
    tokens = text.split()  # fast path: names without blanks, so tokens alternate "name:" "value"
    if tokens[:2] == _HEADER_TOKENS:
        del tokens[:2]
    names, values = tokens[0::2], tokens[1::2]
    # map() over str methods keeps the per-name work in C (8 NICs x ~60-300 statistics per scrape).
    if (len(names) == len(values) and all(map(str.endswith, names, repeat(":")))
            and all_counters(values)):
        return tuple(map(str.removesuffix, names, repeat(":"))), tuple(map(int, values))
    return _parse_lines(text, source)


def all_counters(values: list[str]) -> bool:
    """Every token an unsigned decimal counter (ASCII digits, u64): ``int()`` of each cannot fail."""
    joined = "".join(values)
    return joined.isascii() and joined.isdecimal() and max(map(len, values), default=0) <= U64_DIGITS


def _parse_lines(text: str, source: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The slow path, line by line with str methods: linear in the text (a regex with nested blanks
    took 0.8 s on one 8 KB line of blanks)."""
    names, values = [], []
    lines = [line for line in text.splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if number == 1 and line.strip() == _HEADER:
            continue
        if not sep or not name or not is_uint(value):
            raise ValueError(f"{source}: line {number}: expected 'name: integer', got {line.strip()[:80]!r}")
        names.append(name)
        values.append(int(value))
    return tuple(names), tuple(values)


def parse_driver(text: str) -> str | None:
    """The driver name from a ``driver`` file: the ``driver:`` line of ``ethtool -i`` output saved
    verbatim, else the first line (the name alone)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() == "driver":
            return value.strip() or None
    return lines[0] if lines and ":" not in lines[0] else None


@dataclass(frozen=True, slots=True)
class _Names:
    tokens: list[str]          # the "name:" tokens as the file spells them
    names: tuple[str, ...]


def _no_driver(names: Sequence[str]) -> str | None:
    return None


class DirEthtool:
    """``<root>/<iface>/statistics`` and ``<root>/<iface>/driver``; files are read afresh each scrape
    because writers replace them atomically. An interface directory without ``statistics`` has none.
    Where ``driver`` is missing, ``guess_driver`` names the driver from the statistics' names, once per
    interface (the pfc collector passes its table's ``infer_driver``); by default it stays unknown."""

    def __init__(self, root: Path, guess_driver: Callable[[Sequence[str]], str | None] = _no_driver) -> None:
        self.root = root
        self.guess_driver = guess_driver
        self._drivers: dict[str, str | None] = {}
        self._paths: dict[str, str] = {}
        self._names: dict[str, _Names] = {}

    def interfaces(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        except FileNotFoundError:
            return []

    def stats(self, interface: str) -> NicStats | None:
        path = self._paths.get(interface) or self._paths.setdefault(
            interface, os.path.join(self.root, interface, "statistics"))
        try:
            text = read_text(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        names, values = self._parse(interface, text, path)
        if interface not in self._drivers:
            self._drivers[interface] = self._driver(interface) or self.guess_driver(names)
        return NicStats(interface, self._drivers[interface], names, values)

    def _parse(self, interface: str, text: str, path: str) -> tuple[tuple[str, ...], Sequence[int]]:
        """``parse_ethtool_stats``, short-cut while the names are those of the last scrape (they change
        only with the driver's configuration): the same names tuple comes back, so the collector's
        plan for it holds, and only the values are checked and converted."""
        known = self._names.get(interface)
        if known is not None:
            tokens = text.split()
            if tokens[:2] == _HEADER_TOKENS:
                del tokens[:2]
            values = tokens[1::2]
            # All-decimal tokens, as many as names: int() of each cannot fail.
            if tokens[0::2] == known.tokens and len(values) == len(known.names) and all_counters(values):
                return known.names, tuple(map(int, values))
        names, values = parse_ethtool_stats(text, path)
        self._names[interface] = _Names([name + ":" for name in names], names)
        return names, values

    def _driver(self, interface: str) -> str | None:
        try:
            return parse_driver((self.root / interface / "driver").read_text(errors="replace"))
        except OSError:
            return None

    def forget(self, interface: str) -> None:
        self._drivers.pop(interface, None)
        self._paths.pop(interface, None)
        self._names.pop(interface, None)

    def close(self) -> None:
        self._drivers.clear()
        self._names.clear()
