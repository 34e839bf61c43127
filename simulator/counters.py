"""A run's counters at its end, to start another run from (``lockstep sim run --counters-from FILE``).

A cluster's counters do not restart when a new job does: a PDU's lifetime energy, a port's bytes, a
node's storage traffic go on. A history made of several runs (``lockstep demo``'s month, one run
per job) and the live run after it continue each other's counters through this document, so a
consumer sees no reset where one run hands over to the next. Only hardware counters carry over;
job-level ones (steps, lost GPU-seconds) belong to the job.

The document is JSON: ``{"timestamp": T, "counters": {"xid_events": [[seq, flat GPU, XID, Unix time],
...], "energy_mj": [per GPU], "port": {name: [per
port]}, "pfc": {name: [[per NIC x priority]]}, "storm": {...}, "storage": {name: [per node]},
"power": {"chassis_j": [per node], "pdu_j": [per rack]}, "memory": {...}}}`` (simulator/FORMATS.md).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# State attributes holding counters: a dict of arrays, or (None) one array.
GROUPS = {"energy_mj": None, "port": None, "pfc": None, "storm": None, "storage": None, "memory": None,
          "power": ("chassis_j", "pdu_j")}


def of(state) -> dict[str, Any]:
    """The counters of ``state`` as plain lists (with the XIDs seen so far: the node agent counts
    them since it started, across jobs)."""
    out: dict[str, Any] = {"xid_events": [list(e) for e in state.xid_events]}
    for group, keys in GROUPS.items():
        value = getattr(state, group)
        if isinstance(value, dict):
            out[group] = {k: np.asarray(v).tolist() for k, v in value.items() if keys is None or k in keys}
        else:
            out[group] = np.asarray(value).tolist()
    return out


def apply(state, counters: dict[str, Any], where: str = "counters") -> None:
    """Overwrite ``state``'s counters with ``counters`` (as ``of`` gives them); a group or key missing
    keeps its own start, a shape that does not fit is an error naming it."""
    if "xid_events" in counters:
        state.xid_events = [_xid_event(e, len(state.lost), f"{where}: xid_events[{i}]")
                            for i, e in enumerate(counters["xid_events"])]
    for group, keys in GROUPS.items():
        if group not in counters:
            continue
        current = getattr(state, group)
        given = counters[group]
        if isinstance(current, dict):
            for key, values in given.items():
                if key not in current or (keys is not None and key not in keys):
                    raise ValueError(f"{where}: {group}.{key}: not a counter of this cluster")
                current[key] = _fitted(values, current[key], f"{where}: {group}.{key}")
        else:
            setattr(state, group, _fitted(given, current, f"{where}: {group}"))


def _xid_event(event: Any, gpus: int, where: str) -> tuple[int, int, int, float]:
    try:
        seq, gpu, xid, timestamp = event
        event = (int(seq), int(gpu), int(xid), float(timestamp))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: want [sequence, flat GPU index, XID, Unix time]") from None
    if not 0 <= event[1] < gpus:
        raise ValueError(f"{where}: GPU {event[1]} does not exist (the cluster has {gpus})")
    return event


def _fitted(values: Any, like: np.ndarray, where: str) -> np.ndarray:
    array = np.asarray(values, dtype=like.dtype)
    if array.shape != like.shape:
        raise ValueError(f"{where}: shape {array.shape}, this cluster has {like.shape}")
    if not np.all(np.isfinite(array)) or (array < 0).any():
        raise ValueError(f"{where}: counters must be finite and >= 0")
    return array


def write(path: Path, state) -> None:
    path.write_text(json.dumps({"timestamp": state.timestamp, "counters": of(state)}) + "\n")


def read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read counters: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("counters"), dict):
        raise ValueError(f"{path}: not a counters document (no 'counters' object)")
    return doc["counters"]
