"""A ``query_range`` answer (the JSON bytes) → a ``Block``: each series' labels and its samples as arrays.

A 16,384-GPU window is millions of ``[t,"v"]`` pairs; decoded by ``json`` they become millions of
Python lists, floats and strings before numpy sees one. Here the series are found by splitting the answer where
one ends and the next begins (labels are small and decoded per series), and the values of all series are joined into
one ``t,"v"`` line per sample and parsed by Arrow's CSV reader in C++: no Python object per sample.
The fast path takes the layout Prometheus, Thanos, Mimir and VictoriaMetrics write (``metric`` then
``values`` in each series); any other well-formed answer goes through ``json`` (same result, slower).
Anything else raises ``MalformedAnswer``, for the job whose query it answered.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.analytics.prom.grid import Window
from lockstep.exporters.toolkit.jsonload import load_json

_RESULT = b'"result":['
# Each series is '{"metric":{...},"values":[...]}', the next one after a comma: where one ends and the next begins,
# and where its labels end and its values begin.
_METRIC = b'{"metric":'
_NEXT = b']},{"metric":'
_VALUES = b',"values":['
# What replaces the cut between two series' values: a sample no answer has (time -1), so the series'
# ends are found again once the values are parsed.
_MARK = b',[-1,"0"],'
# In the calling thread: answers are decoded side by side already, each in a thread of its own.
_CSV_READ = pacsv.ReadOptions(column_names=["t", "v", "_", "__"], block_size=1 << 24, use_threads=False)
# One pass turns '[t,"v"],[t,"v"],[' into lines 't,v,,' (quotes dropped; two empty fields, ignored): a value
# with a comma in it makes a line of more fields, which the reader refuses.
_PAIRS_TO_LINES = bytes.maketrans(b"[]", b"\n,")
_QUOTE = b'"'
_CSV_PARSE = pacsv.ParseOptions(quote_char=False)
_CSV_CONVERT = pacsv.ConvertOptions(column_types={"t": pa.float64(), "v": pa.float64()}, null_values=["NaN"],
                                    strings_can_be_null=False, include_columns=["t", "v"])


class _NotFast(Exception):
    """The fast path does not know this layout (the generic one decides)."""


@dataclass(frozen=True)
class Block:
    """One answer on a window's grid."""

    labels: list[dict[str, str]]   # per series
    series: np.ndarray             # per sample: the index of its series in ``labels``
    rows: np.ndarray               # per sample: its row on the grid
    values: np.ndarray             # per sample, float64 (NaN as the TSDB wrote it)

    @classmethod
    def empty(cls) -> Block:
        return cls([], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))

    @property
    def samples(self) -> int:
        return len(self.values)


def decode_matrix(body: bytes, grid: Window) -> Block:
    """The matrix of a successful ``query_range`` answer on ``grid``; MalformedAnswer otherwise."""
    try:
        labels, counts, times, values = _fast(body)
    except _NotFast:
        labels, counts, times, values = _generic(body)
    rows = grid.row_of(times)
    if (rows < 0).any():
        bad = float(np.asarray(times)[rows < 0][0])
        raise MalformedAnswer(f"sample at {bad!r} is not on the query grid {grid}")
    return Block(labels, np.repeat(np.arange(len(labels)), counts), rows, values)


def _fast(body: bytes) -> tuple[list[dict], np.ndarray, np.ndarray, np.ndarray]:
    first, last = body.find(_RESULT), body.rfind(b"]}]")
    if first < 0:
        raise _NotFast
    pos = first + len(_RESULT)
    if body[pos:pos + 1] == b"]":
        _envelope(body)
        return [], np.empty(0, np.int64), np.empty(0), np.empty(0)
    if last < pos or not body.startswith(_METRIC, pos):
        raise _NotFast
    _envelope(body[:pos] + body[last + 2:])
    # The series split where one ends and the next begins, then each at its values: plain substring searches in C.
    # Neither boundary can occur inside a label (a quote there is escaped) nor among the values; a split gone
    # wrong leaves labels that are not JSON objects of strings, and the generic path says what is wrong.
    keys, runs = [], []
    for part in body[pos + len(_METRIC):last].split(_NEXT):
        at = part.find(_VALUES)
        if at < 0:
            raise _NotFast
        keys.append(part[:at])
        runs.append(part[at + len(_VALUES):])
    try:
        labels = [_labels(m) for m in load_json(b"[" + b",".join(keys) + b"]")]
    except (ValueError, MalformedAnswer):
        raise _NotFast from None
    try:
        times, values = _parse_pairs(_MARK.join(runs))
    except MalformedAnswer:
        raise _NotFast from None    # the generic path says what is wrong
    ends = np.flatnonzero(times == -1)
    if len(ends) != len(keys) - 1:
        raise _NotFast
    counts = np.diff(np.concatenate(([-1], ends, [len(times)]))) - 1
    keep = times != -1
    return labels, counts, times[keep], values[keep]


def _envelope(text: bytes) -> None:
    """The answer with its series taken out must be a successful matrix answer."""
    try:
        doc = load_json(text)
    except ValueError as exc:
        raise MalformedAnswer(f"not JSON: {exc}") from None
    _check_envelope(doc)


def _check_envelope(doc: object) -> list:
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise MalformedAnswer(f"not a successful answer: {str(doc)[:200]}")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise MalformedAnswer(f"not a matrix: {str(data)[:200]}")
    return data["result"]


def _parse_pairs(text: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``[t,"v"],[t,"v"],...`` → times and values (Arrow's C++ CSV reader; "NaN" is NaN)."""
    if not text:
        return np.empty(0), np.empty(0)
    if not (text.startswith(b"[") and text.endswith(b"]")):
        raise MalformedAnswer("values are not [time, \"value\"] pairs")
    csv = (text + b",[").translate(_PAIRS_TO_LINES, _QUOTE)
    try:
        table = pacsv.read_csv(pa.py_buffer(csv), read_options=_CSV_READ, parse_options=_CSV_PARSE,
                               convert_options=_CSV_CONVERT)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise MalformedAnswer(f"values are not [time, \"value\"] pairs: {str(exc)[:200]}") from None
    if table.column("t").null_count:
        raise MalformedAnswer("values are not [time, \"value\"] pairs: a time is missing")
    return table.column("t").to_numpy(), table.column("v").to_numpy(zero_copy_only=False)


def _labels(metric: object) -> dict[str, str]:
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise MalformedAnswer(f"series labels are not a string map: {str(metric)[:200]}")
    return metric


def _generic(body: bytes) -> tuple[list[dict], np.ndarray, np.ndarray, np.ndarray]:
    """Any key order, through ``json`` (answers the fast path does not recognise)."""
    try:
        result = _check_envelope(load_json(body))
    except ValueError as exc:
        raise MalformedAnswer(f"not JSON: {exc}") from None
    labels, counts, times, values = [], [], [], []
    for series in result:
        pairs = series.get("values") if isinstance(series, dict) else None
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise MalformedAnswer(f"series without [time, \"value\"] pairs: {str(series)[:200]}")
        labels.append(_labels(series.get("metric")))
        counts.append(len(pairs))
        try:
            times += [float(t) for t, _ in pairs]
            values += [float(v) for _, v in pairs]
        except (TypeError, ValueError) as exc:
            raise MalformedAnswer(f"sample is not a number: {exc}") from None
    return labels, np.asarray(counts, dtype=np.int64), np.asarray(times, dtype=float), np.asarray(values, dtype=float)
