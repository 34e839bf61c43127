"""The answer Prometheus gives to an input's query (``lockstep.analytics.frame.inputs``), computed from a simulator frame.

The evaluation harness, the monthly report and tests score simulated series without a TSDB; this is
where their frame (simulator/FORMATS.md, counters cumulative) becomes the same ``Block``s the service
decodes from ``query_range``, so everything after is shared. Each query is followed as Prometheus
2.x evaluates it on a grid of scrapes: ``irate`` over two steps takes the last two samples at or
before each step (a missed scrape leaves a rate across the gap; a counter that went down restarts
from zero), ``sum by`` skips absent series, ``max by`` keeps the largest. One thing is not
followed: a gauge's five-minute lookback (a missed scrape stays absent here, as the scorers expect
of the simulator's missed scrapes).
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from lockstep.analytics.frame.inputs import Input
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window
from lockstep.exporters.catalog import fabric
from lockstep.exporters.catalog.enums import IB_PORT_ACTIVE


def by_metric(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A frame's rows per metric (what ``frame_block`` reads), each without the label columns its metric never has:
    a frame holds every metric's labels (tens of columns), and each answer's filtering copied them all."""
    out = {}
    for name, rows in frame.groupby("metric", observed=True):
        if len(rows):
            out[str(name)] = rows.loc[:, rows.notna().any().to_numpy()]
    return out


class Answers:
    """``frame_block`` over a frame, each answer computed from the rows its window can read only: a query reads up
    to two steps before its window and a sample further off the grid is dropped, so the answer is the one from all
    of them, without filtering the whole run on every query."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.by_metric = {}
        for m, rows in by_metric(frame).items():
            times = rows["timestamp"].to_numpy(dtype=float)
            self.by_metric[m] = rows, times, bool((times[1:] >= times[:-1]).all())

    def block(self, inp: Input, window: Window, job_id: str | None = None,
              nodes: tuple[str, ...] | None = None) -> Block:
        lo, hi = window.start - 3 * window.step, window.end + window.step
        read = metrics_read(inp)
        rows = {m: _between(*held, lo, hi) for m, held in self.by_metric.items() if m in read}
        return frame_block(rows, inp, window, job_id, nodes)


def _between(rows: pd.DataFrame, times: np.ndarray, ordered: bool, lo: float, hi: float) -> pd.DataFrame:
    """The rows from ``lo`` to ``hi``, in their order: a slice where they are in time order (``ordered``: as the
    simulator writes a run, tick by tick)."""
    if ordered:
        return rows.iloc[np.searchsorted(times, lo, "left"):np.searchsorted(times, hi, "right")]
    return rows[(times >= lo) & (times <= hi)]


def frame_block(by_metric: dict[str, pd.DataFrame], inp: Input, grid: Window, job_id: str | None = None,
                nodes: tuple[str, ...] | None = None) -> Block:
    """``inp``'s answer over ``grid`` from a frame's rows grouped by metric (``job_id``: the job an input
    that carries job_id is asked for, None: every job; ``nodes``: the nodes the others are selected on,
    None: every node)."""
    # two rows before the grid: a rate at its first row reads the samples up to two steps back
    wide = Window(grid.start - 2 * grid.step, grid.end, grid.step)
    if nodes is not None and (not inp.own_job_id or inp.node_served):
        read = metrics_read(inp)
        by_metric = {m: _on_nodes(rows, nodes, inp.except_nodes) for m, rows in by_metric.items() if m in read}
    if inp.kind in JOINS:
        keys, matrix = _group([JOINS[inp.kind](by_metric, inp, wide, job_id, nodes)], inp)
        return _block(keys, matrix[2:], inp.by)
    # a ratio's divisor is read with its dividend
    parts = [_part(by_metric, inp, metric, wide, job_id) for metric in inp.metrics[:1 if inp.kind == "ratio" else None]]
    if inp.name == "link":
        parts.append(_link_state(by_metric, wide))
    keys, matrix = _group(parts, inp)
    return _block(keys, matrix[2:], inp.by)


def metrics_read(inp: Input) -> tuple[str, ...]:
    """The metrics whose rows ``inp``'s answer reads: its own, and the links' state for the link input."""
    return (*inp.metrics, fabric.IB_STATE.name) if inp.name == "link" else inp.metrics


def _part(by_metric: dict[str, pd.DataFrame], inp: Input, metric: str, wide: Window,
          job_id: str | None) -> tuple[pd.DataFrame, np.ndarray]:
    """One metric's series on the wide grid as the query transforms them: (their labels, rows × series)."""
    rows = by_metric.get(metric)
    if rows is None or rows.empty:
        return pd.DataFrame(columns=list(inp.by)), np.full((wide.rows, 0), np.nan)
    rows = _selected(rows, inp, job_id if inp.own_job_id else None)
    labels, matrix = series_matrix(rows, wide)
    if inp.kind == "ratio":
        den_labels, den = series_matrix(by_metric.get(inp.metrics[1], rows.iloc[:0]), wide)
        den = _aligned(den_labels, den, labels)
        matrix = matrix / np.where(den > 0, den, np.nan)
    elif inp.kind == "rate":
        matrix = irate(matrix, wide.step)
    elif inp.name == "link":
        matrix = np.where(irate(matrix, wide.step) > 0, 1.0, np.nan)
    elif inp.kind == "present":
        matrix = np.where(matrix > 0, 1.0, np.nan)
    return labels, matrix


def _own(by_metric: dict[str, pd.DataFrame], metric: str, job_id: str | None, inp: Input) -> pd.DataFrame:
    """A metric's rows of the job (all jobs: None), with the input's matchers."""
    rows = by_metric.get(metric)
    if rows is None:
        return pd.DataFrame(columns=list(dict.fromkeys(["timestamp", "metric", "value", *inp.by, "comm", "address"])))
    return _selected(rows, inp, job_id)


def _missing(by_metric: dict[str, pd.DataFrame], inp: Input, wide: Window, job_id: str | None,
             nodes: tuple[str, ...] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """``metrics[0]{...} and on (node, address) metrics[1]{node=~...}``: each missing rank named by a node whose
    address it has."""
    labels, matrix = series_matrix(_own(by_metric, inp.metrics[0], job_id, inp), wide)
    addresses = by_metric.get(inp.metrics[1])
    if not len(labels) or addresses is None:
        return labels, np.full(matrix.shape, np.nan)
    if nodes is not None:
        addresses = _on_nodes(addresses, nodes)
    address_labels, address = series_matrix(addresses, wide)
    at = _aligned(address_labels, address, labels.reindex(columns=["node", "address"], fill_value="").astype(str))
    return labels, np.where(np.isfinite(matrix) & np.isfinite(at), 1.0, np.nan)


def _largest(by_metric: dict[str, pd.DataFrame], inp: Input, wide: Window, job_id: str | None,
             nodes: tuple[str, ...] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """``metrics[0]{...} and on (comm) (max by (comm) (metrics[1]) == scalar(max(metrics[1])))``: the series of
    the communicators as large as the largest, at each row."""
    labels, matrix = series_matrix(_own(by_metric, inp.metrics[0], job_id, inp), wide)
    size_labels, size = series_matrix(_own(by_metric, inp.metrics[1], job_id, inp), wide)
    if not len(labels) or not len(size_labels):
        return labels, np.full(matrix.shape, np.nan)
    comm, comms = pd.factorize(_label(size_labels, "comm").astype(str))
    per_comm = np.full((size.shape[0], len(comms)), -np.inf)
    for c in range(len(comms)):
        per_comm[:, c] = np.max(np.where(np.isfinite(size[:, comm == c]), size[:, comm == c], -np.inf), axis=1)
    largest = per_comm.max(axis=1, keepdims=True)
    top = (per_comm == largest) & np.isfinite(per_comm)
    of = pd.Index(comms).get_indexer(_label(labels, "comm").astype(str))
    keep = np.where(of >= 0, top[:, np.maximum(of, 0)], False)
    return labels, np.where(np.isfinite(matrix) & keep, 1.0, np.nan)


JOINS = {"missing": _missing, "largest": _largest}


def _link_state(by_metric: dict[str, pd.DataFrame], wide: Window) -> tuple[pd.DataFrame, np.ndarray]:
    rows = by_metric.get(fabric.IB_STATE.name)
    if rows is None or rows.empty:
        return pd.DataFrame(columns=["node", "device"]), np.full((wide.rows, 0), np.nan)
    labels, matrix = series_matrix(rows, wide)
    return labels, np.where(np.isfinite(matrix) & (matrix != IB_PORT_ACTIVE), 1.0, np.nan)


def _matchers(match: str) -> dict[str, str]:
    """``reason=~"a|b"`` → {"reason": "a|b"} (the only form the inputs use)."""
    return {m.group(1): m.group(2) for m in re.finditer(r'(\w+)=~"([^"]*)"', match)}


def _selected(rows: pd.DataFrame, inp: Input, job_id: str | None) -> pd.DataFrame:
    """The rows of ``job_id`` (None: every job's) that the input's label matchers select."""
    if job_id is not None:
        rows = _kept(rows, _where(_label(rows, "job_id"), lambda v: v == job_id))
    return _matched(rows, inp)


def _on_nodes(rows: pd.DataFrame, nodes: tuple[str, ...], elsewhere: bool = False) -> pd.DataFrame:
    """The rows of ``nodes`` (a query's ``node=~`` matcher); ``elsewhere``: of every other node (``node!~``)."""
    return _kept(rows, _where(_label(rows, "node"), lambda v: np.isin(v, nodes, invert=elsewhere)))


def _matched(rows: pd.DataFrame, inp: Input) -> pd.DataFrame:
    """The rows the input's label matchers select (anchored regular expressions, as PromQL's ``=~``)."""
    for name, allowed in _matchers(inp.match).items():
        pattern = re.compile(allowed)
        rows = _kept(rows, _where(_label(rows, name), lambda v, p=pattern: [p.fullmatch(x) is not None for x in v]))
    return rows


def _kept(rows: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """The rows where ``keep`` holds: all of them as they are when it holds everywhere (one job's run, every node
    asked for), where taking them would copy every column for nothing."""
    return rows if keep.all() else rows[keep]


def _label(rows: pd.DataFrame, name: str) -> pd.Series:
    """A label column; "" on every row where the rows' metric has no such label (``by_metric`` left it out)."""
    return rows[name] if name in rows.columns else pd.Series("", index=rows.index, dtype=object)


def _where(column: pd.Series, keep: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per row, whether ``keep`` holds for its value as a string (judged once per distinct value: a label column is
    categorical, and converting its rows to strings on every query cost most of an emulated answer)."""
    codes, values = _codes(column)
    return np.asarray(keep(values), bool)[codes]


def series_matrix(rows: pd.DataFrame, grid: Window) -> tuple[pd.DataFrame, np.ndarray]:
    """One metric's rows → (the label values of each series, grid rows × series); samples off the grid
    are dropped, absent ones are NaN. Built from integer codes: a 1,024-GPU hour has millions of rows."""
    keys = [c for c in rows.columns if c not in ("timestamp", "metric", "value")]
    at = grid.row_of(rows["timestamp"].to_numpy(dtype=float))
    samples = rows["value"].to_numpy(dtype=float)
    coded = [_codes(rows[k]) for k in keys]
    on_grid = at >= 0
    if not on_grid.all():    # the rows on the grid, from the columns' codes (taking the frame's rows copies them all)
        kept = np.flatnonzero(on_grid)
        at, samples, coded = at[kept], samples[kept], [(codes[kept], names) for codes, names in coded]
    if not len(at):
        return pd.DataFrame(columns=keys), np.full((grid.rows, 0), np.nan)
    varying = [c for c, _ in coded if len(c) and c.max() > c.min()]
    flat = np.ravel_multi_index(varying, [c.max() + 1 for c in varying]) if varying else np.zeros(len(at), int)
    series, used = pd.factorize(flat)
    first = np.unique(series, return_index=True)[1]
    # object columns: left to infer, pandas would convert every one to its string dtype on every answer
    labels = pd.DataFrame({k: values[codes[first]] for k, (codes, values) in zip(keys, coded)}, dtype=object)
    matrix = np.full((grid.rows, len(used)), np.nan)
    matrix[at, series] = samples
    return labels, matrix


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and their string values (categorical columns cost nothing here)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = _category_values(column.dtype.categories)
        codes = column.array.codes
        return np.where(codes < 0, len(values) - 1, codes), values      # missing reads as ""
    codes, values = pd.factorize(column.astype(str))
    return codes, np.asarray(values, dtype=object)


def _category_values(categories: pd.Index) -> np.ndarray:
    """A categorical column's categories as strings, then "" (code -1: missing); converted once per column of a
    frame, whose rows grouped by metric or cut by time share them. Cached by identity with the categories
    held, so that no other object can take their id while they are cached."""
    held = _CATEGORIES.get(id(categories))
    if held is None or held[0] is not categories:
        if len(_CATEGORIES) >= _MAX_CATEGORIES:
            _CATEGORIES.clear()
        held = _CATEGORIES[id(categories)] = (categories, np.append(categories.astype(str).to_numpy(), ""))
    return held[1]


_CATEGORIES: dict[int, tuple[pd.Index, np.ndarray]] = {}
_MAX_CATEGORIES = 512


def _aligned(labels: pd.DataFrame, matrix: np.ndarray, to: pd.DataFrame) -> np.ndarray:
    """``matrix``'s columns reordered to the series of ``to`` (one-to-one on every label; NaN: none)."""
    if not len(to.columns):
        return np.full((matrix.shape[0], len(to)), np.nan)
    index = pd.MultiIndex.from_frame(labels.reindex(columns=list(to.columns), fill_value="")) if len(labels) else None
    at = index.get_indexer(pd.MultiIndex.from_frame(to)) if index is not None and len(to) else np.full(len(to), -1)
    out = np.full((matrix.shape[0], len(to)), np.nan)
    out[:, at >= 0] = matrix[:, at[at >= 0]]
    return out


def irate(matrix: np.ndarray, step: float) -> np.ndarray:
    """Prometheus' ``irate(x[2 * step])`` at each row: the last two samples in the two steps up to it; a
    value lower than the one before is a counter restarted from zero."""
    n = matrix.shape[0]
    present = np.isfinite(matrix)
    last = np.maximum.accumulate(np.where(present, np.arange(n)[:, None], -1), axis=0)
    before = np.vstack([np.full((1, matrix.shape[1]), -1), last[:-1]])
    cols = np.arange(matrix.shape[1])
    prev = np.where(last >= 1, before[np.maximum(last, 0), cols], -1)
    ok = (last >= np.arange(n)[:, None] - 2) & (prev >= np.arange(n)[:, None] - 2) & (prev >= 0)
    v1 = matrix[np.maximum(last, 0), cols]
    v0 = matrix[np.maximum(prev, 0), cols]
    dt = np.round((last - prev) * step * 1000) / 1000
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(v1 < v0, v1, v1 - v0) / dt
    return np.where(ok, rate, np.nan)


def _group(parts: list[tuple[pd.DataFrame, np.ndarray]], inp: Input) -> tuple[pd.DataFrame, np.ndarray]:
    """``max by``, ``sum by`` (absent series skipped) or ``group by`` over the series of every part."""
    labels = pd.concat([p[0].reindex(columns=list(inp.by), fill_value="") for p in parts], ignore_index=True)
    matrix = np.hstack([p[1] for p in parts])
    if not len(labels):
        return labels, matrix
    # the groups in the order they first appear, as a MultiIndex's factorize numbers them, from each label's codes
    codes = [pd.factorize(labels[k].to_numpy(dtype=object).astype(str), use_na_sentinel=False)[0] for k in inp.by]
    group = pd.factorize(np.ravel_multi_index(codes, [c.max() + 1 for c in codes]))[0]
    keys = labels.iloc[np.unique(group, return_index=True)[1]].reset_index(drop=True)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1]])
    values, finite = matrix[:, order], np.isfinite(matrix[:, order])
    seen = np.logical_or.reduceat(finite, starts, axis=1)
    if inp.kind == "rate":
        reduced = np.add.reduceat(np.where(finite, values, 0.0), starts, axis=1)
    elif inp.kind in ("present", *JOINS):
        reduced = np.ones(seen.shape)
    else:
        reduced = np.maximum.reduceat(np.where(finite, values, -np.inf), starts, axis=1)
    return keys, np.where(seen, reduced, np.nan)


def _block(keys: pd.DataFrame, matrix: np.ndarray, by: tuple[str, ...]) -> Block:
    rows, series = np.nonzero(np.isfinite(matrix))
    order = np.lexsort((rows, series))
    labels = [{k: v for k, v in zip(by, values) if v != ""} for values in keys.itertuples(index=False)]
    return Block(labels, series[order], rows[order], matrix[rows[order], series[order]])
