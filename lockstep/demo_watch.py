"""What the demo prints: the status table, and alerts as they start and stop firing
(``GET /api/v1/alerts`` of the demo's Prometheus, polled)."""
from __future__ import annotations

import json
import re
from typing import Mapping

from lockstep.analytics.service.views import JobSummary
from lockstep.stack import Service, http_get

_AGENT = re.compile(r"^node agent ")


def status_rows(services: Mapping[str, Service]) -> list[tuple[str, str, str]]:
    """(component, URL, state); the node agents are folded into one row."""
    rows, agents = [], [s for n, s in services.items() if _AGENT.match(n)]
    for name, s in services.items():
        if not _AGENT.match(name):
            rows.append((name, s.url, "up" if s.alive() else f"EXITED ({s.proc.returncode}), log: {s.log_path}"))
    if agents:
        ports = sorted(int(s.url.rsplit(":", 1)[1]) for s in agents)
        span = f"{ports[0]}-{ports[-1]}" if ports == list(range(ports[0], ports[0] + len(ports))) else "various"
        up = sum(s.alive() for s in agents)
        rows.insert(1, (f"node agents ({len(agents)})", f"http://127.0.0.1:{span}/metrics", f"{up}/{len(agents)} up"))
    return rows


def format_table(rows: list[tuple[str, str, str]]) -> str:
    header = ("COMPONENT", "URL", "STATE")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(2)]
    return "\n".join(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}" for r in [header, *rows])


def _key(alert: dict) -> tuple:
    return tuple(sorted(alert["labels"].items()))


def describe(alert: dict) -> str:
    labels = alert["labels"]
    keys = ("node", "gpu", "rank", "cause", "interface", "priority", "direction", "level", "job_id", "rack")
    where = " ".join(f"{k}={labels[k]}" for k in keys if k in labels)
    return f"{labels.get('alertname', '?')} [{labels.get('severity', '?')}] {where}".rstrip()


class AlertWatcher:
    """``poll()`` returns lines for alerts that began or stopped firing since the previous poll."""

    def __init__(self, prometheus_url: str) -> None:
        self.url, self.firing = prometheus_url, {}

    def poll(self) -> list[str]:
        try:
            status, body = http_get(f"{self.url}/api/v1/alerts", timeout=5)
            alerts = json.loads(body)["data"]["alerts"] if status == 200 else None
        except (OSError, ValueError, KeyError):
            alerts = None
        if alerts is None:
            return []  # Prometheus busy or restarting: keep the last known state
        now = {_key(a): a for a in alerts if a.get("state") == "firing"}
        lines = [f"ALERT    firing   {describe(a)}" for k, a in now.items() if k not in self.firing]
        lines += [f"ALERT    resolved {describe(a)}" for k, a in self.firing.items() if k not in now]
        self.firing = now
        return lines


class FindingWatcher:
    """``poll()`` returns lines for stragglers and stalls the analytics service newly reports
    (``GET /api/v1/jobs`` of ``lockstep analytics serve``)."""

    def __init__(self, analytics_url: str) -> None:
        self.url, self.seen = analytics_url, set()

    def poll(self) -> list[str]:
        try:
            status, body = http_get(f"{self.url}/api/v1/jobs", timeout=5)
            jobs = [JobSummary.from_json(row) for row in json.loads(body)["data"]] if status == 200 else []
        except (OSError, ValueError, KeyError, TypeError):
            jobs = []
        lines = []
        for job in jobs:
            for s in job.stragglers:
                if s.flagged and (key := ("straggler", job.job_id, s.node, s.gpu)) not in self.seen:
                    self.seen.add(key)
                    gpu = f" gpu {s.gpu}" if s.gpu is not None else ""
                    lines.append(f"ANALYTICS straggler job {job.job_id}: {s.node}{gpu} (score {s.score:.2f})")
            stall = ("stall", job.job_id, job.cause)
            if job.stalled and stall not in self.seen:
                self.seen.add(stall)
                lines.append(f"ANALYTICS job {job.job_id} stalled: {job.cause}")
            elif not job.stalled:
                self.seen = {k for k in self.seen if k[:2] != ("stall", job.job_id)}
        return lines
