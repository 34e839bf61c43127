"""``validation``: the latest cluster validation result per test and scale, as ``lockstep validate`` stored it
under ``<--validation.results-dir>/<node>/<kind>/<test>@<scale>.json`` (the node's short host name; the
directory may be shared by every node). Each file is parsed again only when it changed (inode, mtime,
size): a scrape costs one ``stat`` per test, however long the history behind it. A file larger than the
store ever writes (``lockstep.validation.store.MAX_SERIES_BYTES``) is logged once and skipped, never read."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.catalog import validation as m
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample
from lockstep.validation.model import figure_key
from lockstep.validation.result import short_node
from lockstep.validation.store import DEFAULT_DIR, MAX_SERIES_BYTES, read_series

log = logging.getLogger("lockstep.collector.validation")


@dataclass(frozen=True)
class ValidationOptions:
    results_dir: Path
    node: str

    @staticmethod
    def add_flags(group) -> None:
        add_flag(group, "validation.results-dir",
                 help=f"results directory written by `lockstep validate` (default {DEFAULT_DIR}); this "
                      "node's results are under <dir>/<short host name>")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "ValidationOptions":
        return cls(Path(config.flag("validation.results-dir", DEFAULT_DIR)), short_node(config.node_name))


def series_samples(doc: dict) -> list[Sample]:
    """The samples of one series document (validation/store.py)."""
    latest = doc["latest"]
    run = (latest["kind"], latest["test"], str(latest["scale"]))
    out = [Sample(m.STATUS, run + (latest["status"],), 1.0), Sample(m.LAST_RUN, run, float(latest["started"]))]
    if latest.get("duration_seconds") is not None:
        out.append(Sample(m.DURATION, run, float(latest["duration_seconds"])))
    if latest.get("tool_version"):
        out.append(Sample(m.TOOL_INFO, run + (latest["tool_version"],), 1.0))
    # Only checks that did not pass: a level-3 diagnostic on 8 GPUs is 56 checks, a node's series budget 1,500.
    out += [Sample(m.CHECK_STATUS, run + (c["name"], c["subject"], c["status"]), 1.0)
            for c in latest["checks"] if c["status"] != "pass"]
    history = (doc.get("baseline") or {}).get("history") or {}
    for subject, name, unit, value in latest["figure_list"]:
        if unit not in m.FIGURE_METRICS:
            continue   # kept for the report only (ranks)
        metric, baseline = m.FIGURE_METRICS[unit]
        labels = run + (subject, name)
        out.append(Sample(metric, labels, float(value)))
        key = figure_key(subject, name, unit)
        if baseline is not None and key in history:
            out.append(Sample(baseline, labels + ("history",), float(history[key])))
    return out


class ValidationCollector:
    def __init__(self, options: ValidationOptions) -> None:
        self.node_dir = os.path.join(options.results_dir, options.node)
        self._cache: dict[str, tuple[tuple[int, int, int], list[Sample]]] = {}

    def _files(self) -> Iterable[os.DirEntry]:
        try:
            kinds = [e for e in os.scandir(self.node_dir) if e.is_dir()]
        except FileNotFoundError:
            return []   # nothing validated on this node yet
        return [f for kind in kinds for f in os.scandir(kind.path)
                if f.name.endswith(".json") and not f.name.startswith(".")]

    def _samples(self, path: str, key: tuple[int, int, int]) -> list[Sample]:
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        if key[2] > MAX_SERIES_BYTES:
            once(log, logging.WARNING, f"{path}:{key}", "skipping validation result %s: %d bytes, larger than the "
                 "%d MiB a result is stored in (written by an older lockstep? ingest the run again)", path, key[2],
                 MAX_SERIES_BYTES >> 20)
            self._cache[path] = (key, [])
            return []
        try:
            samples = series_samples(read_series(path))
        except FileNotFoundError:
            return []   # replaced or removed between listing and reading: the next scrape sees the new one
        except (OSError, ValueError, KeyError, TypeError) as exc:
            once(log, logging.WARNING, f"{path}:{key}", "skipping unreadable validation result %s: %s", path, exc)
            samples = []
        self._cache[path] = (key, samples)
        return samples

    def collect(self) -> Iterable[Sample]:
        out, seen = [], set()
        for entry in sorted(self._files(), key=lambda e: e.path):
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            seen.add(entry.path)
            out += self._samples(entry.path, (st.st_ino, st.st_mtime_ns, st.st_size))
        for path in set(self._cache) - seen:
            del self._cache[path]
        return out


@register("validation", help="latest cluster validation results (nccl-tests, perftest, DCGM diag, fio, gpu-burn) "
                             "with their own-history baselines", add_flags=ValidationOptions.add_flags)
def validation(config: ExporterConfig) -> ValidationCollector:
    return ValidationCollector(ValidationOptions.from_config(config))
