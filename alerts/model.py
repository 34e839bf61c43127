"""Rule records and the small PromQL helpers every rule module shares.

Metric names go through ``metric()``, which looks them up in ``lockstep.exporters.catalog`` so a rule can
never name a series nothing emits; recorded series are named ``lockstep:<what>:<how>`` (the
``level:metric:operation`` convention, with our prefix as the level) and live in ``recording.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from lockstep.exporters import catalog
from lockstep.exporters.catalog.enums import SEVERITIES
from lockstep.exporters.toolkit.timeparse import duration_seconds

# Stands for the alert's effective ``for:`` in its description (a site may override it).
FOR = "{for}"


def check_duration(value: str) -> str | None:
    try:
        duration_seconds(value)
    except ValueError:
        return f"must be a Prometheus duration like 30s, 5m, 1h; got {value!r}"
    return None


@dataclass(frozen=True)
class Alert:
    """One alerting rule: an alert of the contract (docs/architecture.md) with its severity and its default
    ``for:`` (the alerts config may override it per alert name), and a runbook docs/runbooks/<name>.md."""

    name: str
    expr: str
    severity: str
    summary: str
    description: str
    labels: tuple[tuple[str, str], ...] = ()
    keep_firing_for: str = ""
    for_: str = field(kw_only=True)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.name}: severity {self.severity!r} is not one of {SEVERITIES}")
        problem = check_duration(self.for_)
        if problem:
            raise ValueError(f"{self.name}: for: {problem}")

    def render(self, for_: str, runbook_base_url: str) -> dict:
        rule: dict = {"alert": self.name, "expr": self.expr}
        if for_ not in ("0s", "0m"):
            rule["for"] = for_
        if self.keep_firing_for:
            rule["keep_firing_for"] = self.keep_firing_for
        rule["labels"] = {"severity": self.severity, **dict(self.labels)}
        rule["annotations"] = {"summary": self.summary, "description": self.description.replace(FOR, for_),
                               "runbook_url": f"{runbook_base_url}/{self.name}.md"}
        return rule


@dataclass(frozen=True)
class Record:
    """One recording rule."""

    record: str
    expr: str
    labels: tuple[tuple[str, str], ...] = field(default=())

    def render(self) -> dict:
        rule: dict = {"record": self.record, "expr": self.expr}
        if self.labels:
            rule["labels"] = dict(self.labels)
        return rule


def metric(name: str, selector: str = "", extra: str = "") -> str:
    """``name{selector,extra}`` for a catalog metric (a KeyError names an unknown one)."""
    catalog.get(name)
    matchers = ",".join(part for part in (selector, extra) if part)
    return f"{name}{{{matchers}}}" if matchers else name


def attach(expr: str, label: str, on: str, join: str, keep: str | None = None) -> str:
    """``expr`` with ``label`` copied from ``join`` (unique per ``on``); series ``join`` has no match for
    keep their labels (the ``or`` on ``keep``, default ``on``): a fault on an idle part still alerts."""
    return f"(\n  ({expr})\n  * on ({on}) group_left ({label}) {join}\n)\nor on ({keep or on})\n({expr})"


def with_job(expr: str, on: str, join: str, keep: str | None = None) -> str:
    """``expr`` with the ``job_id`` of the job on the part (see ``attach``)."""
    return attach(expr, "job_id", on, join, keep)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Multi-line PromQL as block scalars: the generated file stays readable in review.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: object) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
