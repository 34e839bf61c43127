"""fio: the document ``fio --output-format=json`` prints (``json+`` too; ``fio version`` "fio-3.16").

Per job and direction (read, write, trim: those that moved data): ``bw_bytes`` (bytes/s), ``iops`` and
latency percentiles in nanoseconds — of ``lat_ns`` (submission + completion) where fio computed them
(``lat_percentiles=1``), else ``clat_ns``. A job's ``error`` other than 0 fails its check. fio can print
notes before the document ("note: both iodepth >= 1 and synchronous I/O engine are selected").
"""
from __future__ import annotations

from lockstep.validation.lines import json_document, require_text, scaled
from lockstep.validation.model import Check, Figure, Parsed, ParseError

DIRECTIONS = ("read", "write", "trim")
PERCENTILES = {"50.000000": "p50", "99.000000": "p99", "99.900000": "p99_9"}


def _document(text: str, source: str) -> dict:
    doc, line = json_document(text, source, "`fio --output-format=json`")
    if not isinstance(doc.get("jobs"), list) or "fio version" not in doc:
        raise ParseError(source, line, 'no "fio version" and "jobs" list (not fio JSON output)')
    return doc


def _latencies(stats: dict) -> dict[str, float]:
    for key in ("lat_ns", "clat_ns"):
        percentiles = (stats.get(key) or {}).get("percentile")
        if percentiles:
            # fio reports latency in nanoseconds (the *_ns keys).
            return {name: scaled(str(percentiles[p]), -9) for p, name in PERCENTILES.items() if p in percentiles}
    return {}


def _job_figures(job: dict, name: str) -> list[Figure]:
    figures = []
    for direction in DIRECTIONS:
        stats = job.get(direction) or {}
        if not stats.get("io_bytes"):
            continue
        figures.append(Figure(f"{direction}_bw", "bytes_per_second", float(stats["bw_bytes"]), name))
        figures.append(Figure(f"{direction}_iops", "per_second", float(stats["iops"]), name))
        figures += [Figure(f"{direction}_lat_{p}", "seconds", value, name)
                    for p, value in _latencies(stats).items()]
    return figures


def parse_fio(text: str, source: str = "<fio JSON output>") -> Parsed:
    """Bandwidth, IOPS and latency percentiles per job (the figure's subject) and direction."""
    require_text(text, source)
    doc = _document(text, source)
    figures, checks = [], []
    for index, job in enumerate(doc["jobs"]):
        name = str(job.get("jobname") or f"job{index}")
        try:
            figures += _job_figures(job, name)
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(source, 1, f"job {name}: malformed statistics ({exc})") from None
        error = int(job.get("error") or 0)
        checks.append(Check("job", "fail" if error else "pass", name, f"fio error {error}" if error else ""))
    if not doc["jobs"]:
        raise ParseError(source, 1, "fio reports no jobs")
    version = str(doc["fio version"]).removeprefix("fio-")
    return Parsed("fio", tuple(figures), tuple(checks), (), "", version,
                  {"global_options": doc.get("global options") or {}, "disk_util": doc.get("disk_util") or []})
