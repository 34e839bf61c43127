"""``lockstep sim series``: the model as a long-format frame (FORMATS.md) plus ground truth.

Frames are assembled in chunks of ticks straight into Arrow dictionary columns (one fixed
dictionary per label column, shared by every chunk) and streamed to Parquet, so a 1,024-GPU hour
never sits in memory as one pandas frame.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Collection, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lockstep.simulator.blocks import Block, build_blocks
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import Scenario
from lockstep.simulator.state import State
from lockstep.simulator.truth import Truth

LABEL_COLUMNS = ("node", "gpu", "uuid", "job_id", "user", "rank", "device", "port", "interface", "priority",
                 "direction", "level", "mount", "fstype", "fsname", "op", "reason", "xid", "severity", "category",
                 "action", "target", "pdu", "rack", "loop", "pod", "namespace", "container", "scheduler", "comm",
                 "collective", "address", "pid", "name", "pci_bus_id", "driver_version", "comm_id", "comm_name", "nranks",
                 "n_nodes", "message_size", "algo_proto",
                 "pod_uid", "kind")
CHUNK_TICKS = 60


class Layout:
    """Static part of the frame: per-row codes of every column for one tick, and the dictionaries."""

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks
        self.rows = sum(b.size for b in blocks)
        self.metrics = pa.array(sorted({b.metric.name for b in blocks}))
        metric_index = {m: i for i, m in enumerate(self.metrics.to_pylist())}
        self.node_of_row = node_rows(blocks)
        self.codes: dict[str, np.ndarray] = {"metric": np.concatenate(
            [np.full(b.size, metric_index[b.metric.name], np.int32) for b in blocks])}
        self.dicts: dict[str, pa.Array] = {"metric": self.metrics}
        for col in LABEL_COLUMNS:
            values = np.concatenate([b.labels.get(col, np.full(b.size, "")) for b in blocks]).astype(str)
            uniq, inverse = np.unique(values, return_inverse=True)
            self.codes[col], self.dicts[col] = inverse.astype(np.int32), pa.array(uniq)

    def values(self, state: State, missed: frozenset[str] = frozenset()) -> np.ndarray:
        return tick_values(self.blocks, self.node_of_row, state, missed)

    def table(self, timestamps: list[float], values: list[np.ndarray]) -> pa.Table:
        vals = np.concatenate(values)
        keep = ~np.isnan(vals)
        ticks = len(timestamps)
        cols = {"timestamp": pa.array(np.repeat(np.array(timestamps), self.rows)[keep])}
        for name in ("metric",) + LABEL_COLUMNS:
            idx = np.tile(self.codes[name], ticks)[keep]
            cols[name] = pa.DictionaryArray.from_arrays(pa.array(idx), self.dicts[name])
        cols["value"] = pa.array(vals[keep])
        return pa.table(cols)


def node_rows(blocks: list[Block]) -> np.ndarray:
    """The node of each row of ``blocks``' values."""
    return np.concatenate([b.labels["node"] for b in blocks]).astype(str) if blocks else np.empty(0, str)


def tick_values(blocks: list[Block], node_of_row: np.ndarray, state: State,
                missed: frozenset[str] = frozenset()) -> np.ndarray:
    """One tick's values; the rows of nodes whose scrape went missing are NaN (absent samples)."""
    out = np.concatenate([np.asarray(b.value(state), dtype=float) for b in blocks]) if blocks else np.empty(0)
    if missed:
        out[np.isin(node_of_row, list(missed))] = np.nan
    return out


def missed_nodes(model: Model, k: int) -> frozenset[str]:
    """Nodes whose scrape the scenario's noise drops at tick ``k`` (none under ``noise: none``)."""
    return frozenset(np.array(model.topo.nodes)[model.topo.draws.missed(k, len(model.topo.nodes))])


def tables(scenario: Scenario, truth: Truth | None = None, chunk: int = CHUNK_TICKS,
           metrics: Collection[str] | None = None) -> Iterator[pa.Table]:
    """The frame in chunks of ``chunk`` ticks; ``metrics``: only these metrics' series (the others are not computed:
    a block's values read the tick's state and draw nothing, so the series kept are the same either way)."""
    model = Model(scenario)
    blocks = build_blocks(model.topo)
    if metrics is not None:
        wanted = set(metrics)
        blocks = [b for b in blocks if b.metric.name in wanted]
    layout = Layout(blocks)
    stamps: list[float] = []
    values: list[np.ndarray] = []
    for state in model.states(scenario.ticks):
        if truth is not None:
            truth.observe(state)
        stamps.append(state.timestamp)
        values.append(layout.values(state, missed_nodes(model, state.k)))
        if len(stamps) == chunk:
            yield layout.table(stamps, values)
            stamps, values = [], []
    if stamps:
        yield layout.table(stamps, values)


def series_frame(scenario: Scenario) -> pd.DataFrame:
    """The whole frame in memory (small scenarios: tests, the evaluation harness)."""
    return pa.concat_tables(list(tables(scenario))).to_pandas()


def write_series(scenario: Scenario, out: str | Path) -> tuple[Path, Path, int]:
    """Write ``out`` (Parquet) and ``<out minus .parquet>.truth.json``; returns paths and row count."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    truth = Truth(scenario)
    tmp = out.with_name(out.name + ".tmp")
    rows = 0
    writer = None
    try:
        for table in tables(scenario, truth):
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema, write_statistics=["timestamp"])
            writer.write_table(table)
            rows += table.num_rows
        if writer is not None:
            writer.close()
            writer = None
        tmp.replace(out)
    finally:
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)   # a failed run leaves no half-written frame behind
    truth_path = truth_path_for(out)
    truth_path.write_text(json.dumps(truth.document(), indent=1) + "\n")
    return out, truth_path, rows


def truth_path_for(out: Path) -> Path:
    stem = out.name[:-len(".parquet")] if out.name.endswith(".parquet") else out.name
    return out.with_name(stem + ".truth.json")
