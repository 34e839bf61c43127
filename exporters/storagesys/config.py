"""The storage exporter's YAML config (docs/architecture.md, "Storage exporter config"), loaded once into
frozen objects. Credentials (a bearer token, or a username and a password file: basic auth, or WEKA's login) come
from files named in it; they are never logged or printed."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of, positive
from lockstep.exporters.toolkit.credentials import Credentials

KINDS = ("minio", "ceph-rgw", "vast", "weka")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


@dataclass(frozen=True)
class Target:
    name: str
    kind: str
    url: str  # scheme://host[:port], no path: each kind knows its endpoint
    bearer_token: str | None = field(default=None, repr=False)  # never printed, even in a traceback
    ca_file: str | None = None
    tls_verify: bool = True
    basic_auth: Credentials | None = None   # its repr hides the password; WEKA: the user it logs in as
    org: str | None = None   # WEKA only: the organisation the user belongs to (WEKA's default: the root one)
    views: bool = False      # VAST only: also read VMS's per-view endpoint (/api/prometheusmetrics/views)
    per_host: bool = False   # WEKA only: also read stats_show per node, nodes_list and hosts_list (scope host)
    per_filesystem: bool = False   # WEKA only: also read stats_show of category fs_stats (scope filesystem)


@dataclass(frozen=True)
class StorageConfig:
    targets: tuple[Target, ...]
    interval_s: float = 30.0
    timeout_s: float = 10.0
    max_concurrency: int = 16
    max_answer_bytes: int = 64 << 20

    def target(self, name: str) -> Target | None:
        return next((t for t in self.targets if t.name == name), None)


def _path(s: Section, value: str) -> Path:
    return Path(value) if Path(value).is_absolute() else Path(s.file).parent / value  # relative to the config


def _check_url(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL of the system's API, e.g. https://minio.example:9000"
    if parts.username or parts.password:
        return "must not carry credentials: use bearer_token_file, or username and password_file"
    if parts.path not in ("", "/") or parts.query:
        return "give the system's address only; the exporter knows each kind's endpoint"
    return None


def _target(s: Section) -> Target:
    name = s.get("name", str, check=lambda v: None if _NAME.match(v) else "use letters, digits, _ . : -")
    kind = s.get("kind", str, check=one_of(*KINDS))
    url = s.get("url", str, check=_check_url).rstrip("/")
    token = _secret(s, "bearer_token_file")
    username = s.get("username", str, None, check=lambda v: None if v.strip() else "must not be empty")
    password = _secret(s, "password_file")
    if (username is None) != (password is None):
        raise s.error("username" if username is None else "password_file",
                      "basic auth needs both username and password_file")
    if token is not None and username is not None:
        raise s.error("username", "give bearer_token_file or username and password_file, not both")
    org = s.get("org", str, None, check=lambda v: None if v.strip() else "must not be empty")
    if kind == "weka":
        if token is not None:
            raise s.error("bearer_token_file", "weka logs in with username and password_file, not a token")
        if username is None:
            raise s.error("username", "weka needs username and password_file: the WEKA user to log in as")
    elif org is not None:
        raise s.error("org", "only for kind weka (the WEKA organisation to log in to)")
    views = s.get("views", bool, None)
    if views is not None and kind != "vast":
        raise s.error("views", "only for kind vast (VMS's per-view endpoint, /api/prometheusmetrics/views)")
    per_host = s.get("per_host", bool, None)
    if per_host is not None and kind != "weka":
        raise s.error("per_host", "only for kind weka (stats_show per node, summed per host)")
    per_filesystem = s.get("per_filesystem", bool, None)
    if per_filesystem is not None and kind != "weka":
        raise s.error("per_filesystem", "only for kind weka (stats_show of category fs_stats, per file system)")
    ca_file = s.get("ca_file", str, None)
    if ca_file is not None:
        if not _path(s, ca_file).is_file():
            raise s.error("ca_file", f"{ca_file} is not a file")
        ca_file = str(_path(s, ca_file))
    tls_verify = s.get("tls_verify", bool, True)
    s.finish()
    return Target(name, kind, url, token, ca_file, tls_verify,
                  Credentials(username, password) if username is not None and password is not None else None, org,
                  bool(views), bool(per_host), bool(per_filesystem))


def _secret(s: Section, key: str) -> str | None:
    """The text of the file ``key`` names (relative to the config), stripped; None when the key is absent."""
    name = s.get(key, str, None)
    if name is None:
        return None
    try:
        text = _path(s, name).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise s.error(key, f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text:
        raise s.error(key, f"{name} is empty")
    return text


def parse_config(data: object, file: str | Path) -> StorageConfig:
    top = Section(data, file)
    interval = top.get("interval_s", float, 30.0, check=positive)
    timeout = top.get("timeout_s", float, 10.0, check=positive)
    concurrency = top.get("max_concurrency", int, 16, check=positive)
    targets: list[Target] = []
    for section in top.sections("targets"):
        target = _target(section)
        if any(t.name == target.name for t in targets):
            raise section.error("name", f"duplicate target name {target.name!r}")
        targets.append(target)
    if not targets:
        raise top.error("targets", "at least one target is required")
    if timeout > interval:
        raise top.error("timeout_s", f"must not exceed interval_s ({interval:g})")
    top.finish()
    return StorageConfig(tuple(targets), interval, timeout, concurrency)


def load_config(path: str | Path) -> StorageConfig:
    """Load and validate the config; every problem is a ``ConfigError`` naming FILE:LINE: key."""
    return parse_config(load_yaml(path), path)


__all__ = ["ConfigError", "KINDS", "StorageConfig", "Target", "load_config", "parse_config"]
