"""The power exporter's YAML config (docs/architecture.md, "Power exporter config"), loaded once into
frozen objects. Credentials come from files or the environment; they are never logged or printed."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of, positive
from lockstep.exporters.toolkit.credentials import Credentials

KINDS = ("bmc", "pdu", "cdu", "ipmi")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
# A Prometheus label value from a target's config (name, rack) or its answers (chassis, PSU, outlet Ids):
# real ones are tens of characters. Past this a config is refused, and an answer's value is shortened
# (pollreport.shorten_labels).
MAX_LABEL_CHARS = 128


@dataclass(frozen=True)
class Target:
    name: str
    kind: str
    url: str  # Redfish: scheme://host[:port][/prefix]; ipmi: ipmi://host[:port] or "local"
    rack: str = ""
    budget_watts: float | None = None
    credentials: Credentials | None = None
    tls_verify: bool = True
    ca_file: str | None = None
    ipmi_tool: str = "ipmitool"


@dataclass(frozen=True)
class PowerConfig:
    targets: tuple[Target, ...]
    interval_s: float = 15.0
    timeout_s: float = 5.0
    retries: int = 2
    max_concurrency: int = 100

    def target(self, name: str) -> Target | None:
        return next((t for t in self.targets if t.name == name), None)

    def rack_budgets(self) -> dict[str, float]:
        return {t.rack: t.budget_watts for t in self.targets if t.budget_watts is not None}


def _relative(s: Section, value: str) -> Path:
    """Paths in the config are relative to the config file, as in the exporter-toolkit web config."""
    return Path(value) if Path(value).is_absolute() else Path(s.file).parent / value


def _secret(s: Section, what: str) -> str | None:
    """``<what>_file`` (its content, trailing newline stripped) or ``<what>_env`` (a variable name)."""
    path = s.get(f"{what}_file", str, None)
    env = s.get(f"{what}_env", str, None)
    if path is not None and env is not None:
        raise s.error(f"{what}_env", f"give {what}_file or {what}_env, not both")
    if path is not None:
        try:
            return _relative(s, path).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise s.error(f"{what}_file", f"cannot read {path}: {exc.strerror or exc}") from None
    if env is not None:
        if env not in os.environ:
            raise s.error(f"{what}_env", f"environment variable {env} is not set")
        return os.environ[env]
    return None


def _check_url(kind: str):
    def check(url: str) -> str | None:
        if kind == "ipmi":
            ok = url == "local" or (urlsplit(url).scheme == "ipmi" and urlsplit(url).hostname)
            return None if ok else "must be ipmi://HOST[:PORT] or local"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "must be an http(s) URL; the Redfish service root is <url>/redfish/v1"
        if parts.username or parts.password:
            return "must not carry credentials: use username_file/password_file or username_env/password_env"
        return None
    return check


def _label(value: str) -> str | None:
    """A Prometheus label value of every series of the target: bounded like those from its answers."""
    return f"longer than {MAX_LABEL_CHARS} characters (a label of every series)" if len(value) > MAX_LABEL_CHARS else None


def _target(s: Section) -> Target:
    name = s.get("name", str, check=lambda v: _label(v) or (None if _NAME.match(v) else "use letters, digits, _ . : -"))
    kind = s.get("kind", str, check=one_of(*KINDS))
    url = s.get("url", str, check=_check_url(kind)).rstrip("/")
    username, password = _secret(s, "username"), _secret(s, "password")
    if (username is None) != (password is None):
        raise s.error("password_file" if password is None else "username_file",
                      "username and password come together")
    ca_file = s.get("ca_file", str, None)
    if ca_file is not None:
        if not _relative(s, ca_file).is_file():
            raise s.error("ca_file", f"{ca_file} is not a file")
        ca_file = str(_relative(s, ca_file))
    tool = s.get("ipmi_tool", str, "ipmitool")
    if kind == "ipmi" and url != "local" and "ipmi-dcmi" in Path(tool).name:
        raise s.error("ipmi_tool", "ipmi-dcmi takes passwords only on its command line: use ipmitool "
                                   "(password through IPMI_PASSWORD) for out-of-band targets")
    target = Target(name=name, kind=kind, url=url, rack=str(s.get("rack", (str, int), "", check=lambda v: _label(str(v)))),
                    budget_watts=s.get("budget_watts", float, None, check=positive),
                    credentials=Credentials(username, password) if username is not None else None,
                    tls_verify=s.get("tls_verify", bool, True), ca_file=ca_file, ipmi_tool=tool)
    s.finish()
    return target


def parse_config(data: object, file: str | Path) -> PowerConfig:
    top = Section(data, file)
    interval = top.get("interval_s", float, 15.0, check=positive)
    timeout = top.get("timeout_s", float, 5.0, check=positive)
    retries = top.get("retries", int, 2, check=lambda v: None if 0 <= v <= 10 else "must be 0..10")
    concurrency = top.get("max_concurrency", int, 100, check=positive)
    targets: list[Target] = []
    budgets: dict[str, float] = {}
    for section in top.sections("targets"):
        target = _target(section)
        if any(t.name == target.name for t in targets):
            raise section.error("name", f"duplicate target name {target.name!r}")
        if target.budget_watts is not None:
            if budgets.setdefault(target.rack, target.budget_watts) != target.budget_watts:
                raise section.error("budget_watts", f"rack {target.rack!r} already has budget "
                                                    f"{budgets[target.rack]:g} from another target")
        targets.append(target)
    if not targets:
        raise top.error("targets", "at least one target is required")
    top.finish()
    return PowerConfig(tuple(targets), interval, timeout, retries, concurrency)


def load_config(path: str | Path) -> PowerConfig:
    """Load and validate the config; every problem is a ``ConfigError`` naming FILE:LINE: key."""
    return parse_config(load_yaml(path), path)


__all__ = ["ConfigError", "Credentials", "KINDS", "PowerConfig", "Target", "load_config", "parse_config"]
