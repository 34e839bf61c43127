"""The switch exporter's YAML config (docs/architecture.md, "Switch exporter config"), loaded once into frozen
objects. Credentials and TLS material come from files named in it; they are never logged or printed."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lockstep.exporters.gnmi.paths import PATH_SETS
from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of, positive

_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}$")


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never print the secret, even in a traceback's locals
        return f"Credentials(username={self.username!r}, password=<hidden>)"


@dataclass(frozen=True)
class Tls:
    ca: bytes = field(repr=False)
    cert: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    server_name: str | None = None  # the name the switch's certificate carries, where not its address


@dataclass(frozen=True)
class Target:
    name: str
    address: str  # host:port of the switch's gNMI server
    path_set: str  # sonic | cumulus
    sample_interval_s: float = 10.0
    credentials: Credentials | None = None
    tls: Tls | None = None


@dataclass(frozen=True)
class SwitchConfig:
    targets: tuple[Target, ...]
    reconnect_max_s: float = 30.0  # the longest wait between reconnects (backoff doubles from 0.5 s)


def _read(s: Section, key: str, binary: bool = False) -> str | bytes | None:
    value = s.get(key, str, None)
    if value is None:
        return None
    path = Path(value) if Path(value).is_absolute() else Path(s.file).parent / value  # relative to the config
    try:
        return path.read_bytes() if binary else path.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise s.error(key, f"cannot read {value}: {exc.strerror or exc}") from None


def _target(s: Section, default_interval: float) -> Target:
    name = s.get("name", str, check=lambda v: None if _NAME.match(v) else "use letters, digits, _ . : -")
    address = s.get("address", str, check=lambda v: None if _ADDRESS.match(v) else "must be host:port")
    path_set = s.get("path_set", str, check=one_of(*PATH_SETS))
    interval = s.get("sample_interval_s", float, default_interval, check=positive)
    credentials = None
    if (username := s.get("username", str, None)) is not None:
        password = _read(s, "password_file")
        if password is None:
            raise s.error("password_file", "required with username")
        credentials = Credentials(username, password)
    elif s.get("password_file", str, None) is not None:
        raise s.error("password_file", "give username with it")
    tls = None
    if (ca := _read(s, "ca_file", binary=True)) is not None:
        cert, key = _read(s, "cert_file", binary=True), _read(s, "key_file", binary=True)
        if (cert is None) != (key is None):
            raise s.error("cert_file" if cert is None else "key_file", "give cert_file and key_file together")
        tls = Tls(ca, cert, key, s.get("server_name", str, None))
    else:
        for key in ("cert_file", "key_file", "server_name"):
            if s.get(key, str, None) is not None:
                raise s.error(key, "needs ca_file (TLS)")
    s.finish()
    return Target(name, address, path_set, interval, credentials, tls)


def load_config(path: str | Path) -> SwitchConfig:
    top = Section(load_yaml(path), path)
    interval = top.get("sample_interval_s", float, 10.0, check=positive)
    reconnect = top.get("reconnect_max_s", float, 30.0, check=positive)
    targets = tuple(_target(t, interval) for t in top.sections("targets"))
    top.finish()
    if not targets:
        raise ConfigError(path, top.line, "targets", "at least one target is required")
    seen: set[str] = set()
    for i, t in enumerate(targets):
        if t.name in seen:
            raise ConfigError(path, top.line_of("targets"), f"targets[{i}].name", f"duplicate target {t.name!r}")
        seen.add(t.name)
    return SwitchConfig(targets, reconnect)
