"""The quarantine receiver's decisions, kept apart from HTTP and from Slurm: which alerts of an
Alertmanager webhook notification mean "drain this node", and whether policy allows it now.

Alertmanager posts JSON ``{"version": "4", "status": ..., "alerts": [{"status": "firing",
"labels": {...}, "annotations": {...}, "fingerprint": ...}, ...]}`` (webhook_config payload).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.catalog import xid
from lockstep.exporters.catalog.enums import XID_DRAIN_ACTIONS
from lockstep.exporters.toolkit.jsonload import load_json

# Alerts after which a node must take no more work until someone resets a GPU, reboots or repairs it.
DRAIN_ALERTS = ("GPUUncorrectableECC", "GPURowRemapFailure", "GPURowRemapPending", "InfiniBandLinkDown",
                "GPUFellOffBus", "GPUMissing", "ValidationFailed", "GPUHardwareStraggler")
# Drained for only where they name a host: LinkFailed of a host link carries its node (a switch-to-switch
# link has none and is routed to the pager alone, never to the receiver).
HOST_ALERTS = ("LinkFailed",)
# XID alerts drain by the recovery action the XID catalog gives the code (the alert's `action` label),
# never by a list of codes: reset_gpu, reboot_node and service_hardware all need the node empty first.
XID_ALERTS = ("GPUXidCritical", "GPUXidWarning")
WINDOW_S = 3600.0
# How long a drained node counts as handled. Long enough to absorb Alertmanager's re-sends of a firing
# group (repeat_interval, 4h), short enough that a node repaired and resumed is drained on a new fault.
FORGET_AFTER_S = 24 * 3600.0
# One Slurm node name. scontrol reads NodeName as a hostlist ("node[00-99]", "a,b"), and Alertmanager's
# API accepts alerts with any labels, so anything wider could drain many nodes as one budgeted drain.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A label value quoted into scontrol's Reason=: Alertmanager takes any length (a 128 KiB one made the
# argv too long for scontrol to start, and Alertmanager retried the 502 forever).
REASON_VALUE_CHARS = 64


class BadPayload(ValueError):
    """The body is not an Alertmanager webhook notification."""


@dataclass(frozen=True)
class DrainRequest:
    node: str
    alertname: str
    reason: str


def _clean(value: str) -> str:
    """A label value fit for one line of Reason=: no control characters (a newline would start a
    line of its own in Slurm's reason and logs), at most REASON_VALUE_CHARS characters."""
    flat = "".join(c if c.isprintable() else " " for c in value[:REASON_VALUE_CHARS + 1])
    return flat if len(flat) <= REASON_VALUE_CHARS else flat[:REASON_VALUE_CHARS - 3] + "..."


def _reason(labels: dict[str, str]) -> str:
    parts = [f"{k}={_clean(labels[k])}" for k in ("gpu", "xid", "action", "device", "port") if labels.get(k)]
    # ValidationFailed: the failing run, and the DCGM check and GPU where there is one
    parts += [_clean(labels[k]) for k in ("kind", "test", "check", "subject", "status") if labels.get(k)]
    return f"lockstep {_clean(labels['alertname'])} {' '.join(parts)}".strip()


def xid_action(labels: dict[str, str]) -> str:
    """The XID's recovery action: the alert's ``action`` label, else the catalog's for its ``xid``."""
    if labels.get("action"):
        return labels["action"]
    code = labels.get("xid", "")
    return xid.lookup(int(code)).action if code.isdigit() else ""


def is_hardware_fault(labels: dict[str, str]) -> bool:
    name = labels.get("alertname", "")
    return name in DRAIN_ALERTS or name in HOST_ALERTS or (name in XID_ALERTS and xid_action(labels) in XID_DRAIN_ACTIONS)


@dataclass(frozen=True)
class Refusal:
    """An alert of a notification that cannot be acted on, refused alone: ``index`` in its ``alerts``."""
    index: int
    alertname: str
    error: str

    def __str__(self) -> str:
        return f"alerts[{self.index}] ({self.alertname}): {self.error}" if self.alertname else \
            f"alerts[{self.index}]: {self.error}"


@dataclass(frozen=True)
class Notification:
    drains: list[DrainRequest]
    refused: list[Refusal]


def read_notification(body: bytes) -> Notification:
    """Drain requests for the firing hardware-fault alerts of one notification, one per node, and the
    alerts refused, each for its own reason (labels that are not strings, no node label, a node label
    that is not one node name). One bad alert costs only itself: Alertmanager groups alerts of many
    nodes into one notification, and the valid drains beside a forged or broken alert must still
    happen. BadPayload only for a body that is no webhook notification at all."""
    try:
        payload = load_json(body)
    except ValueError as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    alerts = payload.get("alerts") if isinstance(payload, dict) else None
    if not isinstance(alerts, list):
        raise BadPayload('missing "alerts" list')
    requests: dict[str, DrainRequest] = {}
    refused: list[Refusal] = []
    for i, alert in enumerate(alerts):
        labels = alert.get("labels") if isinstance(alert, dict) else None
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            refused.append(Refusal(i, "", "labels must be a mapping of strings"))
            continue
        if alert.get("status") != "firing" or not is_hardware_fault(labels):
            continue
        node, name = labels.get("node", ""), _clean(labels["alertname"])
        if not node:
            refused.append(Refusal(i, name, "has no node label"))
        elif not NODE_NAME.fullmatch(node) or node.upper() == "ALL":
            refused.append(Refusal(i, name, f"node label {_clean(node)!r} is not one node name"))
        else:
            requests.setdefault(node.casefold(), DrainRequest(node, labels["alertname"], _reason(labels)))
    return Notification(list(requests.values()), refused)


def parse_notification(body: bytes) -> list[DrainRequest]:
    """The drain requests of a notification every alert of which is well formed; BadPayload naming
    the first refused alert otherwise (checking a payload, as a test of what the rules send does)."""
    notification = read_notification(body)
    if notification.refused:
        raise BadPayload(str(notification.refused[0]))
    return notification.drains


class Policy:
    """Idempotency (a node is drained once) and the hourly cap, optionally persisted to a JSON file so
    a restarted receiver neither re-drains nor forgets what it spent of its budget."""

    def __init__(self, max_per_hour: int, state_file: Path | None = None, max_drained_fraction: float = 1.0) -> None:
        self.max_per_hour, self.state_file = max_per_hour, state_file
        self.max_drained_fraction = max_drained_fraction
        self.drained: dict[str, float] = {}
        self.recent: deque[float] = deque()
        if state_file is not None and state_file.exists():
            try:
                state = json.loads(state_file.read_text())
                self.drained = {str(k).casefold(): float(v) for k, v in state.get("drained", {}).items()}
                self.recent = deque(sorted(float(t) for t in state.get("recent", [])))
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                # Refuse to start rather than forget what was drained (and re-drain or overspend the budget).
                raise ValueError(f"{state_file}: unreadable quarantine state: {exc}") from None

    def decide(self, node: str, now: float, fleet: int | None = None) -> str:
        """``already`` (drained within FORGET_AFTER_S), ``rate_limited`` (hourly cap reached),
        ``circuit_open`` (one more would leave more than ``max_drained_fraction`` of a ``fleet`` of
        that many nodes drained) or ``drain``. Every drain spends the cap, a repaired node's new
        drain too: a rule gone wrong that fires on every node drained last week must not take them
        all at once. Node names compare case-insensitively (``Node06`` is ``node06``)."""
        key = node.casefold()
        if key in self.drained and now - self.drained[key] < FORGET_AFTER_S:
            return "already"
        while self.recent and self.recent[0] <= now - WINDOW_S:
            self.recent.popleft()
        if len(self.recent) >= self.max_per_hour:
            return "rate_limited"
        if fleet is not None and self.drained_within(now) + 1 > self.breaker_limit(fleet):
            return "circuit_open"
        return "drain"

    def drained_within(self, now: float) -> int:
        """Nodes drained here that still count as drained (within FORGET_AFTER_S)."""
        return sum(1 for t in self.drained.values() if now - t < FORGET_AFTER_S)

    def breaker_limit(self, fleet: int) -> int:
        """The most nodes that may stand drained at once: a share of the fleet, at least one."""
        return max(1, math.floor(self.max_drained_fraction * fleet + 1e-9))

    def record(self, node: str, now: float, persist: bool = True) -> None:
        self.recent.append(now)
        self.drained[node.casefold()] = now
        if persist and self.state_file is not None:
            write_durably(self.state_file, json.dumps({"drained": self.drained, "recent": list(self.recent)}))


def write_durably(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a power loss leaves the old or the new content, never
    an empty file: the new file is synced before the rename, and the directory after it."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def scontrol_argv(scontrol: str, request: DrainRequest) -> list[str]:
    """The Slurm command line: one argv, never a shell, so a label value cannot inject anything."""
    return [scontrol, "update", f"NodeName={request.node}", "State=DRAIN", f"Reason={request.reason}"]

