"""Long series frame (simulator ``series`` or Prometheus ``query_range``) → per-GPU feature matrices.

Both sources produce the long frame of simulator/FORMATS.md (``timestamp, metric, node, <labels>,
value``; counters cumulative), so everything downstream of ``build_features`` is shared. Each signal
becomes one matrix: rows are sample times, columns are ``(job_id, node, gpu)``. Node-wide signals
(storage, PFC) are repeated on every GPU column of the node so that all matrices share one shape.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from exporters.catalog import analytics, fabric, gpu, storage
from exporters.catalog.enums import IB_PORT_ACTIVE, THROTTLE_REASONS

# ``step``: per-rank step time (compute + all-reduce, no waiting) where the training job exports it.
GPU_GAUGES = {"sm": gpu.SM_ACTIVE.name, "tensor": gpu.TENSOR_ACTIVE.name, "step": analytics.RANK_STEP_SECONDS.name}
NODE_COUNTERS = {"read": storage.READ_BYTES.name, "write": storage.WRITE_BYTES.name,
                 "pause": fabric.PFC_PAUSE_DURATION.name, "cnp": fabric.ROCE_CNP_HANDLED.name}
RAIL_COUNTERS = {"tx": fabric.IB_TRANSMIT_BYTES.name, "xmit_wait": fabric.IB_TRANSMIT_WAIT.name,
                 "link_downed": fabric.IB_LINK_DOWNED.name, "link_recovery": fabric.IB_LINK_ERROR_RECOVERY.name,
                 "symbol_errors": fabric.IB_SYMBOL_ERRORS.name}
LINK_COUNTERS = ("link_downed", "link_recovery", "symbol_errors")
# Every metric build_features reads (what the Prometheus source queries).
INPUT_METRICS = (gpu.JOB_INFO.name, *GPU_GAUGES.values(), gpu.SM_CLOCK.name, gpu.SM_CLOCK_MAX.name,
                 gpu.CLOCK_EVENT.name, fabric.IB_STATE.name, *RAIL_COUNTERS.values(), *NODE_COUNTERS.values())
REASON_PREFIX = "reason:"    # signals[REASON_PREFIX + reason]: 1 while the GPU reports that clock-event reason
SIGNALS = ("sm", "tensor", "step", "clock", "throttle", "tx", "xmit_wait", "link", "read", "write", "pause", "cnp",
           "member")
COLUMNS = ("job_id", "node", "gpu")


@dataclass(frozen=True)
class Features:
    """``signals[name]`` is a float matrix (times × GPUs); absent data is NaN, never zero."""

    times: np.ndarray          # Unix seconds, ascending
    columns: pd.MultiIndex     # (job_id, node, gpu), sorted by job then node then gpu (numeric)
    signals: dict[str, np.ndarray]
    pods: tuple[str, ...] = ()   # per column: the pod that held the GPU for the job (Kubernetes), else ""

    def jobs(self) -> list[str]:
        return list(dict.fromkeys(self.columns.get_level_values("job_id")))

    def job_slice(self, job_id: str) -> slice:
        """Columns of ``job_id`` (they are contiguous: columns are sorted by job)."""
        return slice(*_bounds(self.columns.get_level_values("job_id"), job_id))


def _bounds(level: pd.Index, job_id: str) -> tuple[int, int]:
    hits = np.flatnonzero(np.asarray(level == job_id))
    return (int(hits[0]), int(hits[-1]) + 1) if len(hits) else (0, 0)


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and their string values; categorical columns (both sources) cost nothing here."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), column.cat.categories.astype(str).to_numpy()
    codes, uniques = pd.factorize(column.astype(str))
    return codes, np.asarray(uniques, dtype=object)


def _matrix(rows: pd.DataFrame, times: pd.Index, keys: list[str], how: str = "last") -> pd.DataFrame:
    """times × series matrix of one metric's rows, columns named by ``keys``; rows that share a
    column are combined with ``how`` ("last" or "max").

    Built from integer codes rather than ``pivot_table``: a 1,024-GPU frame has millions of rows."""
    if rows.empty:
        return pd.DataFrame(index=times)
    codes, values = [], []
    for key in keys:
        c, v = _codes(rows[key])
        codes.append(c)
        values.append(v)
    flat = np.ravel_multi_index(codes, [len(v) for v in values])
    col, used = pd.factorize(flat)
    row = times.get_indexer(rows["timestamp"].to_numpy())
    out = np.full((len(times), len(used)), np.nan)
    vals = rows["value"].to_numpy(dtype=float)
    if how == "max":
        out[row, col] = -np.inf
        np.maximum.at(out, (row, col), vals)
    else:
        out[row, col] = vals
    labels = np.unravel_index(np.asarray(used), [len(v) for v in values])
    names = pd.MultiIndex.from_arrays([v[i] for v, i in zip(values, labels)], names=keys)
    return pd.DataFrame(out, index=times, columns=names)


def counter_rate(matrix: pd.DataFrame) -> pd.DataFrame:
    """Per-second increase of cumulative counters; a reset (value went down) gives NaN, not a negative."""
    dt = np.diff(matrix.index.to_numpy(dtype=float), prepend=np.nan)
    delta = matrix.diff()
    rate = delta.div(dt, axis=0)
    return rate.mask(delta < 0)


def _job_map(frame: pd.DataFrame) -> pd.Series:
    """(node, gpu) → the job holding the GPU for most of the window (``lockstep_gpu_job_info``)."""
    info = frame[(frame["metric"] == gpu.JOB_INFO.name) & (frame["value"] > 0)]
    info = info[info["job_id"].astype(str) != ""]
    if info.empty:
        return pd.Series(dtype=object)
    counts = info.groupby(["node", "gpu", "job_id"], observed=True).size()
    best = counts.sort_values().groupby(level=["node", "gpu"], observed=True).tail(1)
    return pd.Series(best.index.get_level_values("job_id").astype(str),
                     index=pd.MultiIndex.from_arrays([best.index.get_level_values("node").astype(str),
                                                      best.index.get_level_values("gpu").astype(str)]))


def _columns(jobs: pd.Series) -> pd.MultiIndex:
    order = sorted(((job, node, g) for (node, g), job in jobs.items()),
                   key=lambda c: (c[0], c[1], int(c[2]) if c[2].isdigit() else c[2]))
    return pd.MultiIndex.from_tuples(order, names=COLUMNS)


def build_features(frame: pd.DataFrame) -> Features:
    """The feature matrices of every GPU that belongs to a job in ``frame`` (FORMATS.md series frame)."""
    frame = frame[frame["metric"].isin(INPUT_METRICS)]
    jobs = _job_map(frame)
    times = pd.Index(np.sort(frame["timestamp"].unique()), name="timestamp")
    if jobs.empty:
        return Features(times.to_numpy(dtype=float), _columns(jobs), {s: np.empty((len(times), 0)) for s in SIGNALS})
    columns = _columns(jobs)
    gpu_cols = pd.MultiIndex.from_arrays([columns.get_level_values("node"), columns.get_level_values("gpu")])
    node_cols = pd.Index(columns.get_level_values("node"))
    by_metric = {name: rows for name, rows in frame.groupby("metric", observed=True) if len(rows)}
    empty = frame.iloc[:0]

    def per_gpu(m: pd.DataFrame, how: str = "last") -> np.ndarray:
        return _align(_matrix(m, times, ["node", "gpu"], how), gpu_cols)

    signals = {name: per_gpu(by_metric.get(metric, empty)) for name, metric in GPU_GAUGES.items()}
    clock = per_gpu(by_metric.get(gpu.SM_CLOCK.name, empty))
    clock_max = per_gpu(by_metric.get(gpu.SM_CLOCK_MAX.name, empty))
    signals["clock"] = np.divide(clock, clock_max, out=np.full_like(clock, np.nan), where=clock_max > 0)
    events = by_metric.get(gpu.CLOCK_EVENT.name, empty)
    signals["throttle"] = per_gpu(events[events["reason"].isin(THROTTLE_REASONS)], "max") if len(events) \
        else np.full_like(clock, np.nan)
    # Each reason on its own as well: a GPU's thermal slowdown must not hide among peers that are
    # merely power-capped (on a busy H100 job sw_power_cap is active most of the time).
    for reason in THROTTLE_REASONS:
        held = events[events["reason"] == reason] if len(events) else events
        if len(held):
            signals[REASON_PREFIX + reason] = per_gpu(held, "max")
    for name, metric in RAIL_COUNTERS.items():
        signals[name] = _rail_rate(by_metric.get(metric, empty), times, gpu_cols)
    state = by_metric.get(fabric.IB_STATE.name, empty)
    down = _rail_matrix(state.assign(value=(state["value"] != IB_PORT_ACTIVE).astype(float)), times, gpu_cols, "max")
    # A rail is "down" while its port is not ACTIVE, or when its link went down, retrained or took
    # symbol errors since the last sample (a 2 s drop can fall between two samples: only the
    # counters see it).
    errors = sum(np.nan_to_num(signals.pop(name)) for name in LINK_COUNTERS)
    signals["link"] = np.fmax(down, (errors > 0).astype(float))
    for name, metric in NODE_COUNTERS.items():
        rows = by_metric.get(metric, empty)
        rate = counter_rate(_matrix(rows, times, _series_keys(rows))) if len(rows) else pd.DataFrame(index=times)
        per_node = rate.T.groupby(level="node", observed=True).sum(min_count=1).T if len(rate.columns) else rate
        signals[name] = per_node.reindex(columns=node_cols).to_numpy(dtype=float)
    info = by_metric.get(gpu.JOB_INFO.name, empty)
    signals["member"] = _membership(info, times, columns)
    return Features(times.to_numpy(dtype=float), columns, signals, _pods(info, columns))


def _membership(info: pd.DataFrame, times: pd.Index, columns: pd.MultiIndex) -> np.ndarray:
    """1 where the column's GPU was mapped to the column's job at that sample, else 0: a member whose
    mapping is gone (its node agent stopped answering, its pod was deleted) shows 0 from then on."""
    info = info[info["value"] > 0]
    matrix = _matrix(info, times, list(COLUMNS))
    if matrix.columns.nlevels == len(COLUMNS):
        matrix.columns = pd.MultiIndex.from_arrays([matrix.columns.get_level_values(i).astype(str)
                                                    for i in range(len(COLUMNS))], names=COLUMNS)
    return (np.nan_to_num(matrix.reindex(columns=columns).to_numpy(dtype=float)) > 0).astype(float)


def _pods(info: pd.DataFrame, columns: pd.MultiIndex) -> tuple[str, ...]:
    """The pod each column's GPU was held by (``pod`` label of the mapping; "" for Slurm)."""
    if "pod" not in info.columns or info.empty:
        return ("",) * len(columns)
    last = info.sort_values("timestamp").groupby(list(COLUMNS), observed=True)["pod"].last()
    found = {tuple(str(v) for v in key): str(pod) for key, pod in last.items()}
    return tuple(found.get(tuple(col), "") for col in columns)


def _series_keys(rows: pd.DataFrame) -> list[str]:
    """The label columns that tell this metric's series apart (node first)."""
    labels = [c for c in rows.columns if c not in ("timestamp", "metric", "value", "node")]
    return ["node"] + [c for c in labels if len(np.unique(_codes(rows[c])[0])) > 1]


def _rail_rate(rows: pd.DataFrame, times: pd.Index, gpu_cols: pd.MultiIndex) -> np.ndarray:
    """Rate of a per-HCA counter, assigned to the GPU on the same rail (GPU i ↔ ``mlx5_i``, FORMATS.md)."""
    return _rail_matrix(rows, times, gpu_cols, "last", rate=True)


def _rail_of(device: str) -> str:
    digits = re.search(r"(\d+)$", device)
    return digits.group(1) if digits else ""


def _rail_matrix(rows: pd.DataFrame, times: pd.Index, gpu_cols: pd.MultiIndex, how: str,
                 rate: bool = False) -> np.ndarray:
    if rows.empty:
        return np.full((len(times), len(gpu_cols)), np.nan)
    matrix = _matrix(rows, times, ["node", "device", "port"], how)
    if rate:
        matrix = counter_rate(matrix)
    rails = [_rail_of(d) for d in matrix.columns.get_level_values("device")]
    keys = pd.MultiIndex.from_arrays([matrix.columns.get_level_values("node"), rails], names=["node", "gpu"])
    grouped = matrix.T.groupby(keys)
    matrix = (grouped.sum(min_count=1) if rate else grouped.max()).T
    return _align(matrix, gpu_cols)


def _align(matrix: pd.DataFrame, cols: pd.Index) -> np.ndarray:
    if matrix.columns.nlevels == 2:
        matrix.columns = pd.MultiIndex.from_arrays([matrix.columns.get_level_values(0).astype(str),
                                                    matrix.columns.get_level_values(1).astype(str)])
    return matrix.reindex(columns=cols).to_numpy(dtype=float)
