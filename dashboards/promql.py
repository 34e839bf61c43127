"""Just enough PromQL reading to list the metric names an expression selects, and to turn a
Grafana panel query into one Prometheus accepts (variables substituted), for lint and tests.
"""
from __future__ import annotations

import re
from typing import Mapping

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# A name not preceded by a word character, `$` or `.` (so no `$job_id`, no exponent of `1e9`).
_NAME = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?")
_KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                       "group_right", "offset", "bool", "inf", "nan", "atan2"})
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\s*\)$", re.DOTALL)
_VARIABLE = re.compile(r"\$\{?(\w+)(?::\w+)?\}?")


def metric_names(expr: str) -> set[str]:
    """Metric names selected by ``expr`` (function and aggregation names are not metrics)."""
    text = _STRING.sub('""', expr)
    text = _BRACES.sub("", text)
    text = _BRACKETS.sub("", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _NAME.finditer(text):
        name, call = match.group(1), match.group(2)
        if call is None and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


def variable_metric_names(query: str) -> set[str]:
    """Metric names of a Grafana Prometheus variable query: ``label_values(SELECTOR, label)``
    (its last argument is a label, not a metric) or a plain PromQL expression."""
    match = _LABEL_VALUES.match(query.strip())
    return metric_names(match.group(1) if match else query)


def grafana_variables(expr: str) -> set[str]:
    """Names of the Grafana variables (``$x``, ``${x}``, ``${x:fmt}``) an expression uses."""
    return set(_VARIABLE.findall(expr))


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace Grafana variables with ``values``; longest names first (``$__range_s`` before
    ``$__range``). A variable without a value raises KeyError naming it."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no value for Grafana variable ${name} in {expr!r}")
        return values[name]

    return _VARIABLE.sub(one, expr)
