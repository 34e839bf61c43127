"""Driver statistics names that carry PFC facts, per driver, as data.

Sources: mlx5 ``Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst`` (per-priority
counters exist only for priorities with PFC enabled; pause duration is in microseconds), Broadcom bnxt_en
``bnxt_ethtool.c`` (``rx_pfc_ena_frames_pri{p}``, extended ``pfc_pri{p}_rx_duration_us``) and Intel ice (E810) ``ice_ethtool.c``
(``rx_priority_{p}_xoff.nic``). ``{p}`` stands for the priority 0-7.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

from lockstep.exporters.catalog import fabric as m
from lockstep.exporters.catalog.model import Metric


@dataclass(frozen=True, slots=True)
class Rule:
    name: str            # driver counter name, {p} = priority
    metric: Metric
    label: str           # direction (rx|tx) for per-priority metrics, level for storm events
    divisor: int = 1     # to the metric's base unit (dividing keeps 2914772 µs printing as 2.914772 s)


_MLX5 = (
    Rule("rx_prio{p}_pause", m.PFC_PAUSE_FRAMES, "rx"), Rule("tx_prio{p}_pause", m.PFC_PAUSE_FRAMES, "tx"),
    Rule("rx_prio{p}_pause_duration", m.PFC_PAUSE_DURATION, "rx", 10**6),  # microseconds
    Rule("tx_prio{p}_pause_duration", m.PFC_PAUSE_DURATION, "tx", 10**6),
    Rule("rx_prio{p}_pause_transition", m.PFC_PAUSE_TRANSITIONS, "rx"),
    Rule("tx_pause_storm_warning_events", m.PFC_STORM_EVENTS, "warning"),
    Rule("tx_pause_storm_error_events", m.PFC_STORM_EVENTS, "error"),
)
_BNXT = (Rule("rx_pfc_ena_frames_pri{p}", m.PFC_PAUSE_FRAMES, "rx"),
         Rule("tx_pfc_ena_frames_pri{p}", m.PFC_PAUSE_FRAMES, "tx"),
         Rule("pfc_pri{p}_rx_duration_us", m.PFC_PAUSE_DURATION, "rx", 10**6),  # extended port stats
         Rule("pfc_pri{p}_tx_duration_us", m.PFC_PAUSE_DURATION, "tx", 10**6),
         Rule("pfc_pri{p}_rx_transitions", m.PFC_PAUSE_TRANSITIONS, "rx"),
         Rule("pfc_pri{p}_tx_transitions", m.PFC_PAUSE_TRANSITIONS, "tx"))
_ICE = (Rule("rx_priority_{p}_xoff.nic", m.PFC_PAUSE_FRAMES, "rx"),
        Rule("tx_priority_{p}_xoff.nic", m.PFC_PAUSE_FRAMES, "tx"))

# Keyed by the driver name ``ethtool -i`` (ETHTOOL_GDRVINFO) reports.
DRIVERS: Mapping[str, tuple[Rule, ...]] = MappingProxyType({"mlx5_core": _MLX5, "bnxt_en": _BNXT, "ice": _ICE})


@dataclass(frozen=True, slots=True)
class Slot:
    """One driver statistic that becomes one sample: its index in the stats array and what it means."""

    index: int
    metric: Metric
    labels: tuple[str, ...]  # the labels after ``interface``: (priority, direction) or (level,)
    divisor: int


def _compile(rule: Rule) -> re.Pattern[str]:
    return re.compile(re.escape(rule.name).replace(re.escape("{p}"), "(?P<p>[0-7])") + r"\Z")


_COMPILED = {driver: tuple((_compile(rule), rule) for rule in rules) for driver, rules in DRIVERS.items()}


def infer_driver(names: Sequence[str]) -> str | None:
    """The table driver whose counter names appear in ``names`` (for statistics files without ``driver``)."""
    for driver, rules in _COMPILED.items():
        if any(pattern.match(name) for name in names for pattern, _ in rules):
            return driver
    return None


def plan(driver: str, names: Sequence[str]) -> tuple[Slot, ...] | None:
    """Which entries of a driver's statistics are PFC facts; None for a driver not in the table.
    Computed once per (driver, name list): drivers print hundreds of statistics per interface."""
    rules = _COMPILED.get(driver)
    if rules is None:
        return None
    slots = []
    for index, name in enumerate(names):
        for pattern, rule in rules:
            match = pattern.match(name)
            if match:
                labels = (match.group("p"), rule.label) if "p" in pattern.groupindex else (rule.label,)
                slots.append(Slot(index, rule.metric, labels, rule.divisor))
                break
    return tuple(slots)
