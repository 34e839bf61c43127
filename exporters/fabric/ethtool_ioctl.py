"""Driver statistics through the ethtool ioctl (``SIOCETHTOOL``), the interface ``ethtool -S`` uses:
``ETHTOOL_GDRVINFO`` (driver name), ``ETHTOOL_GSSET_INFO`` (number of statistics), ``ETHTOOL_GSTRINGS``
(their names, read once per interface and again when the count changes) and ``ETHTOOL_GSTATS`` (the
u64 values). No subprocess per scrape; none of these commands needs CAP_NET_ADMIN.

Structures from include/uapi/linux/ethtool.h and ``struct ifreq`` from include/uapi/linux/if.h.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import socket
import struct
from dataclasses import dataclass

from lockstep.exporters.fabric.ethtool import NicStats

SIOCETHTOOL = 0x8946
ETHTOOL_GDRVINFO = 0x03
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32
_IFNAMSIZ = 16
_IFREQ_SIZE = 40              # struct ifreq on LP64: 16-byte name + 24-byte union (ifr_data pointer)
_DRVINFO_SIZE = 196           # struct ethtool_drvinfo
_DRVINFO_DRIVER = slice(4, 36)
# The kernel writes as many entries as the driver has *now*; a count that grew between GSSET_INFO and
# GSTRINGS/GSTATS (channels reconfigured) must not overrun our buffer, so leave headroom.
_SLACK = 256
_GONE = (errno.ENODEV, errno.ENXIO, errno.ENOENT)
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.EINVAL)


@dataclass
class _Strings:
    count: int
    names: tuple[str, ...]
    driver: str


class IoctlEthtool:
    """``Ethtool`` over one AF_INET datagram socket (the ioctl acts on the caller's network namespace)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._strings: dict[str, _Strings] = {}
        self._buffers: dict[str, ctypes.Array] = {}

    def interfaces(self) -> list[str]:
        return sorted(name for _, name in socket.if_nameindex())

    def _ioctl(self, interface: str, buf: ctypes.Array) -> None:
        name = interface.encode()
        if len(name) >= _IFNAMSIZ:
            raise OSError(errno.ENODEV, f"interface name too long: {interface!r}")
        ifreq = struct.pack(f"{_IFNAMSIZ}sP", name, ctypes.addressof(buf)).ljust(_IFREQ_SIZE, b"\0")
        fcntl.ioctl(self._sock.fileno(), SIOCETHTOOL, ifreq)

    def driver(self, interface: str) -> str:
        buf = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GDRVINFO), _DRVINFO_SIZE)
        self._ioctl(interface, buf)
        return buf.raw[_DRVINFO_DRIVER].split(b"\0", 1)[0].decode(errors="replace")

    def count(self, interface: str) -> int:
        buf = ctypes.create_string_buffer(struct.pack("IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0), 24)
        self._ioctl(interface, buf)
        _, _, mask, count = struct.unpack_from("IIQI", buf.raw)
        return count if mask & (1 << ETH_SS_STATS) else 0

    def names(self, interface: str, count: int) -> tuple[str, ...]:
        buf = ctypes.create_string_buffer(struct.pack("III", ETHTOOL_GSTRINGS, ETH_SS_STATS, count),
                                          12 + (count + _SLACK) * ETH_GSTRING_LEN)
        self._ioctl(interface, buf)
        (written,) = struct.unpack_from("I", buf.raw, 8)
        raw = buf.raw[12:12 + min(written, count) * ETH_GSTRING_LEN]
        return tuple(raw[i:i + ETH_GSTRING_LEN].split(b"\0", 1)[0].decode(errors="replace")
                     for i in range(0, len(raw), ETH_GSTRING_LEN))

    def values(self, interface: str, count: int) -> list[int]:
        buf = self._buffers.get(interface)
        if buf is None or len(buf) < 8 + (count + _SLACK) * 8:
            buf = self._buffers[interface] = ctypes.create_string_buffer(8 + (count + _SLACK) * 8)
        struct.pack_into("II", buf, 0, ETHTOOL_GSTATS, count)
        self._ioctl(interface, buf)
        (written,) = struct.unpack_from("I", buf, 4)
        return memoryview(buf).cast("B")[8:8 + min(written, count) * 8].cast("Q").tolist()

    def stats(self, interface: str) -> NicStats | None:
        try:
            count = self.count(interface)
            if count == 0:
                return None
            known = self._strings.get(interface)
            if known is None or known.count != count:
                known = self._strings[interface] = _Strings(count, self.names(interface, count), self.driver(interface))
            values = self.values(interface, count)
        except OSError as exc:
            if exc.errno in _GONE or exc.errno in _UNSUPPORTED:
                self._strings.pop(interface, None)
                return None
            raise
        if len(values) != len(known.names):  # the count changed under us: re-read names next scrape
            self._strings.pop(interface, None)
            return None
        return NicStats(interface, known.driver, known.names, values)

    def forget(self, interface: str) -> None:
        self._strings.pop(interface, None)
        self._buffers.pop(interface, None)

    def close(self) -> None:
        self._sock.close()
        self._strings.clear()
        self._buffers.clear()
