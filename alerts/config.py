"""The one config every rule, recording rule and route is a function of (the mixin convention).

Defaults live here, the selectors in ``exporters.catalog.selectors`` (shared with the dashboards, the
analytics service and the local stack) and each alert's ``for:`` on its own definition; a YAML file
(``lockstep alerts build --config FILE``) overrides any of them and is read with
``exporters.configfile`` so a typo is rejected as ``FILE:LINE: key: reason``::

    selectors: {node: 'job="lockstep-node",cluster="a"'}
    thresholds: {pfc_paused_ratio: 0.3, rack_power_budget_ratio: 0.95}
    validation_floors:            # expected hardware figures (NDR: 400 Gb/s a port)
      - {match: 'kind="perftest",figure="bw_average"', min: 4.5e10}
    for: {PFCPauseStorm: 30s}
    runbook_base_url: https://git.example.com/lockstep/blob/main/docs/runbooks
    alertmanager: {pager_webhook_url: https://pager.example.com/hook}
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from alerts.model import Alert, check_duration
from exporters.catalog.selectors import DEFAULT as DEFAULT_SELECTORS, Selectors
from exporters.configfile import ConfigError, Section, load_yaml, positive


def check_ratio(value: float) -> str | None:
    return None if 0 < value <= 1 else f"must be a fraction in (0, 1], got {value}"


def _check_for(name: str, kind: type):
    if kind is float:
        return check_ratio if name.endswith("_ratio") else None
    return check_duration if name.endswith(("window", "interval", "_for", "group_wait")) else None


@dataclass(frozen=True)
class Thresholds:
    pfc_paused_ratio: float = 0.2           # fraction of wall time a priority spends paused
    pfc_window: str = "1m"
    ib_flaps: float = 2                     # link_downed increments within ib_flap_window
    ib_flap_window: str = "15m"
    ib_symbol_errors: float = 10            # symbol errors within ib_symbol_window
    ib_symbol_window: str = "10m"
    gpu_event_window: str = "10m"           # XID / ECC increase window (which XIDs page: the XID catalog's severity)
    # The analytics service scores no straggler while the whole job is stalled (every rank waits), so a
    # straggler vanishes during each stall; hold its alert through them instead of resolving/re-firing.
    straggler_keep_firing_for: str = "10m"
    checkpoint_lost_ratio: float = 0.1      # checkpoint-stalled share of allocated GPU time
    checkpoint_window: str = "1h"
    rack_power_budget_ratio: float = 0.9
    coolant_supply_celsius: float = 45.0    # ASHRAE W45 class: facility water supply up to 45 °C
    # Rack-side supply loops (a regex): `supply`, another connector `rack2_supply`, another CDU of the same
    # service `2/supply` (exporters/power/cdu.py); not the facility side (`facility_supply`).
    coolant_loop: str = r"([^/]+/)?(rack[^_]*_)?supply"
    # A validation figure below this fraction of a baseline is a regression (0.8: 20 % below).
    validation_regression_ratio: float = 0.8
    validation_min_peers: float = 3         # nodes of a model needed for a peer baseline
    # A failed diagnostic or timed-out run pages only while it is this recent (a burn-in failure from
    # last month is history, not news).
    validation_failed_max_age_seconds: float = 86400.0
    # Which nodes are in service (PromQL with a `node` label); empty: nodes whose agent is up. A site with
    # a Slurm exporter can name its node states instead.
    validation_in_service: str = ""


@dataclass(frozen=True)
class Floor:
    """An expected hardware figure: validation figures matching ``match`` (label matchers, without braces)
    should reach ``min`` (base units: bytes/s, operations/s)."""

    match: str
    min: float


@dataclass(frozen=True)
class Routing:
    """Alertmanager receivers; URLs are placeholders to be set per site."""

    pager_webhook_url: str = "http://pager.invalid/lockstep"
    pagerduty_routing_key_file: str = ""    # set to add a PagerDuty integration to the pager receiver
    queue_webhook_url: str = "http://queue.invalid/lockstep"
    quarantine_webhook_url: str = ""        # set to send hardware faults to `lockstep alerts quarantine-receiver`
    quarantine_bearer_token_file: str = ""
    group_wait: str = "30s"
    pager_group_wait: str = "10s"           # pages go out faster than tickets
    group_interval: str = "5m"
    repeat_interval: str = "4h"


@dataclass(frozen=True)
class AlertsConfig:
    selectors: Selectors = DEFAULT_SELECTORS
    thresholds: Thresholds = Thresholds()
    routing: Routing = Routing()
    for_: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))   # alert name → its for:
    runbook_base_url: str = "https://github.com/lockstep-telemetry/lockstep/blob/main/docs/runbooks"
    validation_floors: tuple[Floor, ...] = ()
    # With 5 s scrapes a storm crosses the 20 % of the 1 m window in ~15 s; +15 s evaluation, +30 s for,
    # +10 s pager group_wait: paged in about a minute, inside the 90 s budget (ARCHITECTURE.md).
    evaluation_interval: str = "15s"

    def for_of(self, alert: Alert) -> str:
        """The alert's ``for:``: the site's override, else its own definition's."""
        return self.for_.get(alert.name, alert.for_)


def _apply(obj: Any, section: Section | None) -> Any:
    """A copy of dataclass ``obj`` with the keys of ``section`` applied, each checked against its field type."""
    if section is None:
        return obj
    changes = {}
    for f in fields(obj):
        kind = float if f.type in ("float", float) else str
        changes[f.name] = section.get(f.name, kind, getattr(obj, f.name), _check_for(f.name, kind))
    section.finish()
    return replace(obj, **changes)


def _for(section: Section | None) -> Mapping[str, str]:
    if section is None:
        return MappingProxyType({})
    # The rule modules define the alerts and import this module: asked here, once a file names one.
    from alerts.rules import alert_names
    known = alert_names()
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
        evaluation_interval=root.get("evaluation_interval", str, base.evaluation_interval, check_duration))
    root.finish()
    return config


__all__ = ["AlertsConfig", "ConfigError", "Floor", "Routing", "Selectors", "Thresholds", "load"]
