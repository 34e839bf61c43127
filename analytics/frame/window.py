"""A job's window held as float32 matrices (grid rows × the job's GPUs, one per signal), filled from
the inputs' answers and moved on by appending rows.

Every row stands on its own (counters arrive as rates, reductions are per row), so rows fetched at
different refreshes are the rows a full fetch would give: a window moved on equals a window fetched
whole (tests hold them to it on a real Prometheus). Per-HCA answers go to the GPU on the same rail
(GPU i ↔ ``mlx5_i``, FORMATS.md), node-wide ones to every GPU of the node.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import MISSING_DEAD, MISSING_UNRESPONSIVE, REASON_PREFIX, SIGNALS, Features
from lockstep.analytics.frame.inputs import GPU_KEY, HCA_KEY, MEMBER, NODE_KEY, Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window

MEMBER_SIGNAL = MEMBER.name    # 1 while the GPU holds the job (lockstep_gpu_job_info), NaN otherwise
# Labels an input's answer leaves on each column, the latest one seen: the pod that holds the GPU for the job
# (Kubernetes), the GPU's rank in the job's largest NCCL communicator.
HELD_LABELS = {MEMBER.name: "pod", "rank": "rank"}


def rail_of(device: str) -> str:
    digits = re.search(r"(\d+)$", device)
    return digits.group(1) if digits else ""


@dataclass
class JobWindow:
    grid: Window
    columns: pd.MultiIndex              # (job_id, node, gpu), sorted by node then gpu (numeric)
    signals: dict[str, np.ndarray]      # grid rows × columns, float32; NaN: absent
    seen: np.ndarray                    # grid rows where the job held GPUs (its rows: the others are not scored)
    held: dict[str, tuple[np.ndarray, np.ndarray]]   # label -> (per column its latest value, the row it was seen at)
    fetched: int = 0                    # samples placed by the fetch that made this window
    _lookup: dict = field(default_factory=dict, repr=False)

    @classmethod
    def empty(cls, grid: Window, columns: pd.MultiIndex) -> JobWindow:
        shape = (grid.rows, len(columns))
        signals = {name: np.full(shape, np.nan, np.float32) for name in SIGNALS}
        signals["link"][:] = 0.0      # a rail is up unless its port state or error counters say otherwise
        held = {label: (np.full(len(columns), "", dtype=object), np.full(len(columns), -1))
                for label in HELD_LABELS.values()}
        return cls(grid, columns, signals, np.zeros(grid.rows, bool), held)

    @property
    def pods(self) -> np.ndarray:
        """Per column: the pod that last held the GPU for the job ("" under Slurm)."""
        return self.held["pod"][0]

    def place(self, inp: Input, block: Block, first: int = 0, job_id: str | None = None) -> None:
        """``block`` (an answer on the grid rows ``first``...) into the matrices its input fills
        (``job_id``: only into that job's columns), where the GPU held the job (members first). Several series
        of one key (an input asked for as stored) are reduced as its query's aggregation would: summed for
        rates, the largest for gauges, 1 while any is present."""
        if inp.kind == "present" and not (block.values > 0).all():   # asked for as stored: present while above 0
            keep = block.values > 0
            block = Block(block.labels, block.series[keep], block.rows[keep], block.values[keep])
        if not block.samples:
            return
        rows = block.rows + first
        if inp is MEMBER:
            self.seen[rows] = True
        of_series = self._columns_of(inp.by, block.labels)
        if job_id is None and (self._placed_dense(inp, block, first, of_series) or
                               self._members_dense(inp, block, first, of_series)):
            return
        col = of_series[block.series]
        if job_id is not None:
            col = np.where(np.asarray(self.columns.get_level_values("job_id") == job_id)[col] & (col >= 0), col, -1)
        rows, col, values, series = _kept(col >= 0, rows, col, block.values, block.series)
        if inp is not MEMBER and inp.by != NODE_KEY:
            held = np.isfinite(self.signals[MEMBER_SIGNAL][rows, col])
            rows, col, values, series = _kept(held, rows, col, values, series)
        if inp.name in HELD_LABELS:
            self._place_label(HELD_LABELS[inp.name], rows, col, series, block.labels)
        if inp.name == "rank":
            return
        distinct = not _shared(of_series[of_series >= 0])   # no two series on one cell: nothing to reduce
        if inp.by == NODE_KEY:
            self._place_nodes(inp.name, rows, col, values, distinct)
        elif inp.name == "missing":
            # the worst a GPU's rank is in any of its communicators: considered dead, else unresponsive
            dead = np.asarray([labels.get("reason", "") == "dead" for labels in block.labels])[series]
            cells = self.signal(inp.name)
            cells[rows, col] = MISSING_UNRESPONSIVE
            cells[rows[dead], col[dead]] = MISSING_DEAD
        elif inp.name == "reasons":   # each reason's samples by its code (a sample's reason is its series')
            names = sorted({block.labels[i].get("reason", "") for i in np.unique(series).tolist()})
            code = {name: k for k, name in enumerate(names)}
            reason = np.asarray([code.get(labels.get("reason", ""), -1) for labels in block.labels])[series]
            for k, name in enumerate(names):
                hit = reason == k
                self.signal(REASON_PREFIX + name)[rows[hit], col[hit]] = 1.0
            self.signals["throttle"][rows, col] = 1.0
        elif inp.by == HCA_KEY and inp.kind == "rate":   # several HCAs (or ports) on one rail: summed
            _reduce_into(self.signals[inp.name], rows, col, values, np.add, 0.0, distinct)
        elif inp.by == HCA_KEY:
            self.signals[inp.name][rows, col] = 1.0
        else:
            values = np.ones(len(values)) if inp.kind == "present" else values
            _reduce_into(self.signal(inp.name), rows, col, values, np.fmax, np.nan, distinct)

    def _placed_dense(self, inp: Input, block: Block, first: int, of_series: np.ndarray) -> bool:
        """The common answer placed as rows of columns: a GPU-keyed value (a gauge, a ratio or a rate) whose every
        series has the same consecutive rows, one series per GPU; the cells where a GPU does not hold the job
        are left as they are, as ``place`` leaves them. False (nothing placed) for any other answer."""
        if inp.by != GPU_KEY or inp.kind not in ("gauge", "ratio", "rate") or inp is MEMBER \
                or inp.name in HELD_LABELS or not len(block.labels):
            return False
        span = _span(block)
        if span is None:
            return False
        lo, n = span
        mine = np.flatnonzero(of_series >= 0)
        col = of_series[mine]
        if _shared(col):   # two series on one GPU: reduced by the general path
            return False
        rows = slice(first + lo, first + lo + n)
        values = block.values.reshape(len(block.labels), n)
        values = (values if len(mine) == len(values) else values[mine]).T
        cells = self.signal(inp.name)[rows]
        if (span := _span_of(col)) is not None:
            # the GPUs of consecutive nodes (a piece of a window asked for by node): written in place
            np.copyto(cells[:, span], values, where=np.isfinite(self.signals[MEMBER_SIGNAL][rows, span]))
        else:
            held = np.isfinite(self.signals[MEMBER_SIGNAL][rows][:, col])
            cells[:, col] = np.where(held, values, cells[:, col])
        return True

    def _members_dense(self, inp: Input, block: Block, first: int, of_series: np.ndarray) -> bool:
        """The membership placed as rows of columns: its every series on the same consecutive rows, one per GPU (a
        window's GPUs asked for by node, every row at once): 1 on those cells, each GPU's pod that of its series
        where these rows are its latest, as ``place`` leaves them. False (nothing placed) for any other answer."""
        if inp is not MEMBER or (span := _span(block)) is None:
            return False
        mine = np.flatnonzero(of_series >= 0)
        col = of_series[mine]
        if _shared(col):   # two series on one GPU (a pod replaced): the latest row decides, in the general path
            return False
        lo, n = span
        self.signals[MEMBER_SIGNAL][first + lo:first + lo + n, col] = 1.0
        last = first + lo + n - 1
        pods, seen = self.held[HELD_LABELS[MEMBER.name]]
        newer = last > seen[col]
        for i, c in zip(mine[newer].tolist(), col[newer].tolist()):
            pods[c], seen[c] = block.labels[i].get(HELD_LABELS[MEMBER.name], ""), last
        return True

    def add_inputs(self, other: JobWindow, inputs: tuple[Input, ...]) -> None:
        """The matrices and held labels of ``inputs`` taken from ``other``: the same grid and columns, fetched
        with them (this window was fetched without them)."""
        if other.grid != self.grid or not other.columns.equals(self.columns):
            raise ValueError("add_inputs: the windows differ in grid or columns")
        for inp in inputs:
            if inp.name in HELD_LABELS:
                self.held[HELD_LABELS[inp.name]] = other.held[HELD_LABELS[inp.name]]
            if inp.name in other.signals:
                self.signals[inp.name] = other.signals[inp.name]

    def widened(self, columns: pd.MultiIndex) -> JobWindow:
        """This window with the columns of ``columns`` (a superset, in their order), the new ones empty."""
        out = JobWindow.empty(self.grid, columns)
        at = columns.get_indexer(self.columns)
        for name, matrix in self.signals.items():
            out.signal(name)[:, at] = matrix
        out.seen, out.fetched = self.seen.copy(), self.fetched
        for label, (values, seen) in self.held.items():
            out.held[label][0][at], out.held[label][1][at] = values, seen
        return out

    def signal(self, name: str) -> np.ndarray:
        """The matrix of ``name``, created absent where it is new (a clock-event reason first seen)."""
        if name not in self.signals:
            self.signals[name] = np.full((self.grid.rows, len(self.columns)), np.nan, np.float32)
        return self.signals[name]

    def _columns_of(self, by: tuple[str, ...], labels: list[dict[str, str]]) -> np.ndarray:
        """Per series: its GPU column, or for node-wide series the node's index (-1: none of the job's)."""
        if not self._lookup:
            nodes = self.columns.get_level_values("node")
            self._lookup["gpu"] = {(n, g): i for i, (_, n, g) in enumerate(self.columns)}
            self._lookup["node"] = {n: i for i, n in enumerate(dict.fromkeys(nodes))}
            self._lookup["node_of_column"] = np.asarray([self._lookup["node"][n] for n in nodes], dtype=np.int64)
        if by == NODE_KEY:
            return np.asarray([self._lookup["node"].get(s.get("node", ""), -1) for s in labels], dtype=np.int64)
        column = self._lookup["gpu"].get
        if by[:2] == GPU_KEY:
            return np.asarray([column((s.get("node", ""), s.get("gpu", "")), -1) for s in labels], dtype=np.int64)
        return np.asarray([column((s.get("node", ""), rail_of(s.get("device", ""))), -1) for s in labels],
                          dtype=np.int64)

    def _place_label(self, label: str, rows: np.ndarray, col: np.ndarray, series: np.ndarray,
                     labels: list[dict]) -> None:
        """Each column's ``label`` as of its latest row (a pod replaced within the window: the new one)."""
        values, seen = self.held[label]
        order = np.lexsort((rows, col))
        last = order[np.r_[col[order][1:] != col[order][:-1], True]] if len(order) else order
        newer = rows[last] > seen[col[last]]
        for i in last[newer]:
            values[col[i]], seen[col[i]] = labels[series[i]].get(label, ""), rows[i]

    def _place_nodes(self, name: str, rows: np.ndarray, nodes: np.ndarray, values: np.ndarray,
                     distinct: bool = False) -> None:
        """Node-wide rates (a node's series summed; ``distinct``: one per node), repeated on every GPU column of
        the node that holds the job (all matrices share one shape)."""
        if not len(rows):
            return
        first = rows.min()
        per_node = np.full((rows.max() - first + 1, len(self._lookup["node"])), np.nan)
        _reduce_into(per_node, rows - first, nodes, values, np.add, 0.0, distinct)
        touched = np.unique(rows)
        # only the columns of the nodes answered: an answer for a group of the job's nodes leaves the others
        cols = np.flatnonzero(np.isin(self._lookup["node_of_column"], np.unique(nodes)))
        per_column = per_node[touched - first][:, self._lookup["node_of_column"][cols]]
        cells = (_span_of(touched), _span_of(cols))
        if None in cells:
            cells = np.ix_(touched, cols)
        held = np.isfinite(self.signals[MEMBER_SIGNAL][cells])
        self.signal(name)[cells] = np.where(held, per_column, np.nan)

    def members(self) -> np.ndarray:
        """Per column: the GPU held the job at some row of the window."""
        return np.isfinite(self.signals[MEMBER_SIGNAL]).any(axis=0)

    def features(self, rows: np.ndarray | None = None) -> Features:
        """The rows the job has data in, as the scorers read them (a clock-event reason only where held);
        ``rows``: only those of them (a window not fetched whole yet: its complete rows)."""
        seen = self.seen if rows is None else self.seen & rows
        keep = slice(None) if seen.all() else seen
        signals = {name: m[keep] for name, m in self.signals.items()
                   if not name.startswith(REASON_PREFIX) or np.isfinite(m).any()}
        return Features(self.grid.times()[keep], self.columns, signals, tuple(self.pods),
                        tuple(self.held["rank"][0]))

    def moved_to(self, window: Window, rows: JobWindow) -> JobWindow:
        """This window's rows from ``window.start`` up to where ``rows`` (fetched on the same lattice,
        same columns) begin, then ``rows``: the window ending at ``window.end``."""
        skip = round((window.start - self.grid.start) / self.grid.step)
        upto = round((rows.grid.start - self.grid.start) / self.grid.step)
        signals = {}
        for name in dict.fromkeys([*self.signals, *rows.signals]):
            old = self.signal(name)[skip:upto]
            signals[name] = np.concatenate([old, rows.signal(name)])
        # a label held earlier stays where no newer row says otherwise (rows past the window's start kept too)
        held = {}
        for label, (values, seen) in self.held.items():
            new_values, new_seen = rows.held[label]
            newer = new_seen >= 0
            kept = np.where(seen >= skip, seen - skip, -1)
            held[label] = (np.where(newer, new_values, values), np.where(newer, new_seen + upto - skip, kept))
        return JobWindow(window, self.columns, signals, np.concatenate([self.seen[skip:upto], rows.seen]), held)


def _span(block: Block) -> tuple[int, int] | None:
    """(first row, rows) when every series of ``block`` holds the same consecutive rows, its samples grouped
    by series in order (as ``decode_matrix`` gives them); None otherwise."""
    count = len(block.labels)
    n, extra = divmod(block.samples, count)
    if extra or not n:
        return None
    rows, series = block.rows.reshape(count, n), block.series.reshape(count, n)
    lo = int(rows[0, 0])
    if not ((rows == np.arange(lo, lo + n)).all() and (series == np.arange(count)[:, None]).all()):
        return None
    return lo, n


def _span_of(index: np.ndarray) -> slice | None:
    """``index`` as a slice where it counts up one by one (every row of a piece, the GPUs of a group of consecutive
    nodes): its cells a view, not a copy; None otherwise."""
    return slice(int(index[0]), int(index[-1]) + 1) if len(index) and (np.diff(index) == 1).all() else None


def _kept(keep: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays`` where ``keep``; as they are when it keeps all (most answers: each sample a GPU holding the job)."""
    return arrays if keep.all() else tuple(a[keep] for a in arrays)


def _shared(columns: np.ndarray) -> bool:
    """Whether two series of an answer land on one column."""
    return len(np.unique(columns)) < len(columns)


def _reduce_into(out: np.ndarray, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, ufunc: np.ufunc,
                 start: float, distinct: bool) -> None:
    """``out[rows, cols]`` = ``ufunc`` (``np.add``: several HCAs on one rail, a node's series; ``np.fmax``: what
    the ``max by`` / ``group by`` left out of a query asked for as stored keeps) over the values landing on each
    cell from ``start``, in float64; ``distinct``: no two of them land on one cell, placed as they are."""
    if distinct:
        out[rows, cols] = values
        return
    flat = rows * out.shape[1] + cols
    cells, at = np.unique(flat, return_inverse=True)
    total = np.full(len(cells), start)
    ufunc.at(total, at, values)
    out.flat[cells] = total
