"""The quarantine receiver's decisions, kept apart from HTTP and from Slurm: which alerts of an
Alertmanager webhook notification mean "drain this node", and whether policy allows it now.

Alertmanager posts JSON ``{"version": "4", "status": ..., "alerts": [{"status": "firing",
"labels": {...}, "annotations": {...}, "fingerprint": ...}, ...]}`` (webhook_config payload).
"""
from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

# Alerts after which a node must take no more work; GPUXidCritical only for XID 79 (fell off the bus):
# other critical XIDs can clear with a GPU reset and are a human's call.
DRAIN_ALERTS = ("GPUUncorrectableECC", "GPURowRemapFailure", "InfiniBandLinkDown", "GPUFellOffBus")
DRAIN_XIDS = ("79",)
WINDOW_S = 3600.0
# How long a drained node counts as handled. Long enough to absorb Alertmanager's re-sends of a firing
# group (repeat_interval, 4h), short enough that a node repaired and resumed is drained on a new fault.
FORGET_AFTER_S = 24 * 3600.0
# One Slurm node name. scontrol reads NodeName as a hostlist ("node[00-99]", "a,b"), and Alertmanager's
# API accepts alerts with any labels, so anything wider could drain many nodes as one budgeted drain.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class BadPayload(ValueError):
    """The body is not an Alertmanager webhook notification."""


@dataclass(frozen=True)
class DrainRequest:
    node: str
    alertname: str
    reason: str


def _reason(labels: dict[str, str]) -> str:
    detail = " ".join(f"{k}={labels[k]}" for k in ("gpu", "xid", "device", "port") if labels.get(k))
    return f"lockstep {labels['alertname']} {detail}".strip()


def is_hardware_fault(labels: dict[str, str]) -> bool:
    name = labels.get("alertname", "")
    return name in DRAIN_ALERTS or (name == "GPUXidCritical" and labels.get("xid") in DRAIN_XIDS)


def parse_notification(body: bytes) -> list[DrainRequest]:
    """Drain requests for the firing hardware-fault alerts of one notification, one per node."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    alerts = payload.get("alerts") if isinstance(payload, dict) else None
    if not isinstance(alerts, list):
        raise BadPayload('missing "alerts" list')
    requests: dict[str, DrainRequest] = {}
    for i, alert in enumerate(alerts):
        labels = alert.get("labels") if isinstance(alert, dict) else None
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise BadPayload(f"alerts[{i}].labels must be a mapping of strings")
        if alert.get("status") != "firing" or not is_hardware_fault(labels):
            continue
        node = labels.get("node", "")
        if not node:
            raise BadPayload(f"alerts[{i}] ({labels.get('alertname')}) has no node label")
        if not NODE_NAME.fullmatch(node) or node.upper() == "ALL":
            raise BadPayload(f"alerts[{i}] ({labels.get('alertname')}): node label {node!r} is not one node name")
        requests.setdefault(node, DrainRequest(node, labels["alertname"], _reason(labels)))
    return list(requests.values())


class Policy:
    """Idempotency (a node is drained once) and the hourly cap, optionally persisted to a JSON file so
    a restarted receiver neither re-drains nor forgets what it spent of its budget."""

    def __init__(self, max_per_hour: int, state_file: Path | None = None) -> None:
        self.max_per_hour, self.state_file = max_per_hour, state_file
        self.drained: dict[str, float] = {}
        self.recent: deque[float] = deque()
        if state_file is not None and state_file.exists():
            try:
                state = json.loads(state_file.read_text())
                self.drained = {str(k): float(v) for k, v in state.get("drained", {}).items()}
                self.recent = deque(sorted(float(t) for t in state.get("recent", [])))
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                # Refuse to start rather than forget what was drained (and re-drain or overspend the budget).
                raise ValueError(f"{state_file}: unreadable quarantine state: {exc}") from None

    def decide(self, node: str, now: float) -> str:
        """``already`` (drained within FORGET_AFTER_S), ``rate_limited`` (hourly cap reached) or ``drain``.
        Every drain spends the cap, a repaired node's new drain too: a rule gone wrong that fires on
        every node drained last week must not take them all at once."""
        if node in self.drained and now - self.drained[node] < FORGET_AFTER_S:
            return "already"
        while self.recent and self.recent[0] <= now - WINDOW_S:
            self.recent.popleft()
        return "rate_limited" if len(self.recent) >= self.max_per_hour else "drain"

    def record(self, node: str, now: float, persist: bool = True) -> None:
        self.recent.append(now)
        self.drained[node] = now
        if persist and self.state_file is not None:
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"drained": self.drained, "recent": list(self.recent)}))
            tmp.replace(self.state_file)


def scontrol_argv(scontrol: str, request: DrainRequest) -> list[str]:
    """The Slurm command line: one argv, never a shell, so a label value cannot inject anything."""
    return [scontrol, "update", f"NodeName={request.node}", "State=DRAIN", f"Reason={request.reason}"]

