"""``--web.listen-address`` values: ``:9840``, ``127.0.0.1:0``, ``[::1]:9840``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ListenAddress:
    host: str | None  # None: every interface
    port: int

    def __str__(self) -> str:
        host = self.host or ""
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def parse_listen_address(text: str) -> ListenAddress:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid listen address {text!r}: want HOST:PORT or :PORT, port 0-65535")
    host = host.strip("[]")
    return ListenAddress(host or None, int(port))
