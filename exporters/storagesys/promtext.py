"""Prometheus text exposition (format 0.0.4) parsed into plain samples, for the systems whose interface
is a Prometheus endpoint (MinIO, Ceph's exporter). Pure: text in, tuples out.

Only the lines of the wanted prefix are read (a MinIO or ceph-exporter answer is mostly other series):
each such line must be a whole sample, ``name{label="value",...} value [timestamp]``, or the answer is an
``AnswerError``; comments and the other series are skipped unread."""
from __future__ import annotations

import math
import re
from typing import NamedTuple

from lockstep.exporters.storagesys.errors import AnswerError

_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+([^ \t]+)(?:[ \t]+-?[0-9]+)?[ \t\r]*")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf, "Inf": math.inf}


class PromSample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


# A system answers the same label sets poll after poll: each one's text is parsed once (the regular expression per
# label was most of a poll's CPU: 846 lines of a 20-bucket MinIO answer, 12.8 ms) and its pairs kept, bounded.
_LABEL_CACHE: dict[str, tuple[tuple[str, str], ...]] = {}
_MAX_CACHED_LABELS = 100_000


def _labels(text: str, line_no: int) -> dict[str, str]:
    """The labels of one sample: a new dict each time (callers may keep or change it), from pairs parsed once per
    distinct text."""
    pairs = _LABEL_CACHE.get(text)
    if pairs is None:
        pairs = _parse_labels(text, line_no)
        if len(_LABEL_CACHE) >= _MAX_CACHED_LABELS:
            _LABEL_CACHE.clear()    # label churn (buckets, views and hosts come and go) must not grow memory forever
        _LABEL_CACHE[text] = pairs
    return dict(pairs)


def _parse_labels(text: str, line_no: int) -> tuple[tuple[str, str], ...]:
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None or match.end() == pos:
            raise AnswerError(f"not Prometheus text exposition: line {line_no}: bad labels")
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
    return tuple(labels.items())


def _value(text: str, line_no: int) -> float:
    if text in _SPECIAL:
        return _SPECIAL[text]
    try:
        if "_" in text or text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise AnswerError(f"not Prometheus text exposition: line {line_no}: bad value {text[:40]!r}") from None


def parse_samples(text: str, prefix: str | tuple[str, ...], names: tuple[str, ...] | None = None) -> list[PromSample]:
    """Every sample whose name starts with ``prefix`` (or one of them); an answer in which such a line is not a sample, or
    that holds no sample of ``prefix`` at all, is an ``AnswerError`` (a login page or another service's
    metrics answered with 200 would otherwise read as a healthy system with nothing in it). Samples whose
    value is not finite are left out. ``names``: only the lines that start with one of these are read (the series a
    caller maps; a MinIO bucket answer is three quarters histograms and gauges it does not), the others of
    ``prefix`` only count as its samples being there."""
    found: list[PromSample] = []
    seen = False
    read = prefix if names is None else names
    for line_no, line in enumerate(text.split("\n"), 1):
        if not line.startswith(read):
            if not seen and names is not None and line.startswith(prefix) and _SAMPLE.fullmatch(line):
                seen = True
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None:
            raise AnswerError(f"not Prometheus text exposition: line {line_no}: {line[:80]!r}")
        name, labels, value = match.groups()
        parsed = _value(value, line_no)
        seen = True
        if math.isfinite(parsed):
            found.append(PromSample(name, _labels(labels, line_no) if labels else {}, parsed))
    if not seen:
        wanted = " or ".join(f"{p}*" for p in ((prefix,) if isinstance(prefix, str) else prefix))
        raise AnswerError(f"no {wanted} sample in the answer")
    return found


def by_label(text: str, prefix: str, label: str, names: tuple[str, ...] | None = None) -> dict[str, list[PromSample]]:
    """``parse_samples`` grouped by the value of ``label`` (a store's server or gateway; "" where absent), in the
    order each value first appears."""
    groups: dict[str, list[PromSample]] = {}
    for sample in parse_samples(text, prefix, names):
        groups.setdefault(sample[1].get(label, ""), []).append(sample)
    return groups
