"""The one config every rule, recording rule and route is a function of (the mixin convention).

Defaults live in ``lockstep.alerts.settings``, the selectors in
``lockstep.exporters.catalog.selectors`` (shared with the dashboards, the analytics service and the local
stack) and each alert's ``for:`` on its own definition; a YAML file
(``lockstep alerts build --config FILE``) overrides any of them and is read with
``lockstep.exporters.toolkit.configfile`` so a typo is rejected as ``FILE:LINE: key: reason``::

    selectors: {node: 'job="lockstep-node",cluster="a"'}
    thresholds: {pfc_paused_ratio: 0.3, rack_power_budget_ratio: 0.95}
    validation_floors:            # expected hardware figures (NDR: 400 Gb/s a port)
      - {match: 'kind="perftest",figure="bw_average"', min: 4.5e10}
    for: {PFCPauseStorm: 30s}
    runbook_base_url: https://git.example.com/lockstep/blob/main/docs/runbooks
    alertmanager: {pager_webhook_url: https://pager.example.com/hook}
"""
from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lockstep.alerts import rules
from lockstep.alerts.model import check_duration
from lockstep.alerts.settings import AlertsConfig, Floor, Routing, Selectors, Thresholds
from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, positive


def check_ratio(value: float) -> str | None:
    return None if 0 < value <= 1 else f"must be a fraction in (0, 1], got {value}"


def _check_for(name: str, kind: type):
    if kind is float:
        return check_ratio if name.endswith("_ratio") else None
    return check_duration if name.endswith(("window", "interval", "_for", "group_wait")) else None


def _apply(obj: Any, section: Section | None) -> Any:
    """A copy of dataclass ``obj`` with the keys of ``section`` applied, each checked against its field type."""
    if section is None:
        return obj
    changes = {}
    for f in fields(obj):
        kind = float if f.type in ("float", float) else bool if f.type in ("bool", bool) else str
        changes[f.name] = section.get(f.name, kind, getattr(obj, f.name), _check_for(f.name, kind))
    section.finish()
    return replace(obj, **changes)


def _for(section: Section | None) -> Mapping[str, str]:
    if section is None:
        return MappingProxyType({})
    known = rules.alert_names()
    overrides = {}
    for name in list(section.data):
        if name not in known:
            raise section.error(name, f"unknown alert (expected one of: {', '.join(known)})")
        overrides[name] = section.get(name, str, check=check_duration)
    return MappingProxyType(overrides)


def _floors(root: Section) -> tuple[Floor, ...]:
    """``validation_floors: [{match: 'kind="perftest",figure="bw_average"', min: 4.5e10}, ...]``"""
    floors = []
    for section in root.sections("validation_floors"):
        floors.append(Floor(section.get("match", str), _number(section, "min")))
        section.finish()
    return tuple(floors)


def _number(section: Section, key: str) -> float:
    """A positive number; PyYAML (YAML 1.1) reads ``4.5e10`` (no exponent sign) as a string."""
    value = section.get(key, (float, str))
    try:
        value = float(value)
    except ValueError:
        raise section.error(key, f"must be a number, got {value!r}") from None
    if problem := positive(value):
        raise section.error(key, problem)
    return value


def load(path: str | Path | None) -> AlertsConfig:
    """The defaults, or the defaults overridden by the YAML file at ``path``."""
    base = AlertsConfig()
    if path is None:
        return base
    data = load_yaml(path)
    root = Section({} if data is None else data, path)
    config = AlertsConfig(
        selectors=_apply(base.selectors, root.section("selectors", None)),
        thresholds=_apply(base.thresholds, root.section("thresholds", None)),
        routing=_apply(base.routing, root.section("alertmanager", None)),
        for_=_for(root.section("for", None)),
        runbook_base_url=root.get("runbook_base_url", str, base.runbook_base_url).rstrip("/"),
        validation_floors=_floors(root),
        evaluation_interval=root.get("evaluation_interval", str, base.evaluation_interval, check_duration),
        analytics_step=root.get("analytics_step", str, base.analytics_step, check_duration))
    root.finish()
    return config


__all__ = ["AlertsConfig", "ConfigError", "Floor", "Routing", "Selectors", "Thresholds", "load"]
