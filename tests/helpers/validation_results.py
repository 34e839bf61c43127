"""Validation results for the dashboard and alert tests, written through the real store from the real captures:
every node ran all_reduce_perf four times (a week apart) and a level-3 DCGM diagnostic; a degraded node's
last all-reduce is 30 % low, a failing node's diagnostic fails memory on gpu3."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable

import pandas as pd

from lockstep.exporters.collectors.validation import series_samples
from lockstep.validation.parsers import parse_file
from lockstep.validation.result import from_parsed
from lockstep.validation.store import Store, read_series
from tests.helpers.paths import FIXTURES

V = FIXTURES / "validation"
WEEK = 7 * 86400.0


def _scaled(parsed, factor: float):
    return replace(parsed, figures=tuple(replace(f, value=f.value * factor) if f.unit == "bytes_per_second" else f
                                         for f in parsed.figures))


def fill(root: Path, nodes: Iterable[str], degraded: str = "", failing: str = "", now: float | None = None) -> Store:
    now = time.time() if now is None else now
    store = Store(root)
    allreduce = parse_file("nccl", V / "nccl_allreduce.log")
    diag = {name: parse_file("dcgm-diag", V / f"dcgm_diag_r3_{name}.constructed.json") for name in ("pass", "fail")}
    for node in nodes:
        for week in range(4):
            factor = 0.7 if node == degraded and week == 3 else 1.0
            started = now - (3 - week) * WEEK - 600
            store.write(from_parsed(_scaled(allreduce, factor), "all_reduce_perf", (node,), started, 95.0, "test"))
        store.write(from_parsed(diag["fail" if node == failing else "pass"], "diag-r3", (node,), now - 300, 900.0,
                                "test"))
    return store


def frame_rows(root: Path, nodes: Iterable[str], timestamps: Iterable[float]) -> pd.DataFrame:
    """The series the node agents would serve for ``root``, as series-frame rows at ``timestamps``, with
    the GPU model their GPU collector serves (``lockstep_gpu_info``, which peer baselines group by and the
    simulator's series frame does not hold)."""
    rows = []
    for node in nodes:
        samples = [s for path in sorted((root / node).glob("*/*.json")) for s in series_samples(read_series(path))]
        for t in timestamps:
            rows.append({"timestamp": t, "metric": "lockstep_gpu_info", "node": node, "gpu": "0",
                         "uuid": f"GPU-{node}", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0",
                         "driver_version": "550.90.07", "value": 1.0})
            rows += [{"timestamp": t, "metric": s.metric.name, "node": node, **dict(zip(s.metric.labels, s.labels)),
                      "value": s.value} for s in samples]
    return pd.DataFrame(rows)
