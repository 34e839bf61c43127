"""``lockstep validate report``: each test's latest result beside its baselines.

Baselines here: the node's own history (median of its last good runs, from the store) and its peers —
the median of the other nodes' latest results for the same test and scale, when the results directory
holds several nodes (a shared directory). The floor from expected hardware figures lives in the alert
rules (alerts/), where Prometheus also computes peers for node-local directories.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from lockstep.validation.baseline import BASELINED_UNITS
from lockstep.validation.model import figure_key


@dataclass(frozen=True)
class Row:
    node: str
    kind: str
    test: str
    scale: int
    status: str
    started: float
    figure: str            # figure key, '' for a run without baselined figures
    unit: str
    value: float | None
    history: float | None
    peers: float | None
    message: str


def _series_key(latest: dict) -> tuple:
    return latest["kind"], latest["test"], int(latest["scale"])


def _peer_medians(docs: dict[str, list[dict]]) -> dict[tuple, dict[str, float]]:
    """(kind, test, scale) -> node -> figure -> median of the *other* nodes' latest values."""
    values: dict[tuple, dict[str, dict[str, float]]] = {}
    for node, series in docs.items():
        for doc in series:
            latest = doc["latest"]
            if latest["status"] == "pass":
                values.setdefault(_series_key(latest), {})[node] = latest["figures"]
    medians: dict[tuple, dict[str, float]] = {}
    for key, by_node in values.items():
        for node in docs:
            others = [figs for other, figs in by_node.items() if other != node]
            figures = {k for figs in others for k in figs}
            medians[key + (node,)] = {k: statistics.median(f[k] for f in others if k in f) for k in figures}
    return medians


def rows(docs: dict[str, list[dict]]) -> list[Row]:
    """``docs``: node -> its series documents (``Store.node_series``)."""
    peers = _peer_medians(docs)
    out = []
    for node, series in sorted(docs.items()):
        for doc in series:
            latest, history = doc["latest"], doc.get("baseline", {}).get("history", {})
            peer = peers.get(_series_key(latest) + (node,), {})
            figures = [(s, n, u, v) for s, n, u, v in latest["figure_list"] if u in BASELINED_UNITS]
            common = (node, latest["kind"], latest["test"], int(latest["scale"]), latest["status"],
                      float(latest["started"]))
            if not figures:
                out.append(Row(*common, "", "", None, None, None, latest.get("message", "")))
            for subject, name, unit, value in figures:
                key = figure_key(subject, name, unit)
                out.append(Row(*common, key, unit, value, history.get(key), peer.get(key), latest.get("message", "")))
    return out


def human(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes_per_second":
        return f"{value / 1e9:.2f} GB/s"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}/s"
    return f"{value:.2f} /s"


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}" if value is not None and base else "-"


def render(report_rows: list[Row], fraction: float, now: float | None = None) -> str:
    """A table; LOW marks a figure more than ``fraction`` below its history or peer baseline."""
    now = time.time() if now is None else now
    header = ("NODE", "KIND", "TEST", "SCALE", "STATUS", "AGE", "FIGURE", "VALUE", "HISTORY", "x", "PEERS", "x", "")
    lines = [header]
    for r in report_rows:
        low = any(b and r.value is not None and r.value < (1 - fraction) * b for b in (r.history, r.peers))
        age_h = (now - r.started) / 3600
        lines.append((r.node, r.kind, r.test, str(r.scale), r.status, f"{age_h:.1f}h", r.figure or "-",
                      human(r.value, r.unit), human(r.history, r.unit), ratio(r.value, r.history),
                      human(r.peers, r.unit), ratio(r.value, r.peers), "LOW" if low else ""))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines) + "\n"
