"""Simulated series → Prometheus TSDB blocks, with ``promtool tsdb create-blocks-from openmetrics``.

Lines are built in Arrow, not one Python string per sample: each series' ``name{labels}`` is
formatted once, and a chunk of samples becomes text in a few vectorized calls. They are appended to
a file, and a file goes to promtool once it holds ``samples_per_file`` samples, in the background
while the next one fills (promtool on the other core). Each file becomes blocks of its own time
range: what is in memory at once is one chunk of lines here and one file's samples in promtool,
however long the range. Every series is written in time order, which is all promtool needs
(metric families may interleave: the lines carry no metadata).

Node-level series get ``instance`` and ``node`` (the node name) and the ``job`` of the scrape job
that serves them live; cluster-level series (no node) only the ``job``.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lockstep.exporters.catalog.selectors import ANALYTICS_JOB, NODE_JOB, POWER_JOB
from lockstep.exporters.toolkit.exposition import escape_label_value
from lockstep.stack import require_binary

SAMPLES_PER_FILE = 10_000_000     # ~1.2 GB of text, which promtool maps whole, with the file's series


@cache
def label_columns(metric_name: str) -> list[str]:
    """The catalog labels of ``metric_name`` other than ``node`` (written from the node column)."""
    from lockstep.exporters.catalog import get
    # `node` is already the frame's own column (a metric such as
    # lockstep_rank_step_seconds also lists it as a catalog label): emit it once.
    return [label for label in get(metric_name).labels if label != "node"]


@cache
def _job_of(metric_name: str) -> str:
    from lockstep.exporters.catalog import analytics, get, power
    metric = get(metric_name)
    return POWER_JOB if metric in power.METRICS else ANALYTICS_JOB if metric in analytics.METRICS else NODE_JOB


def series_prefix(metric_name: str, node: str, labels: Mapping[str, str]) -> str:
    """``name{job=...,instance=...,node=...,<catalog labels>}``, labels as a live scrape gives them."""
    pairs = [("job", _job_of(metric_name))] + ([("instance", node), ("node", node)] if node else [])
    pairs += [(name, str(labels.get(name, ""))) for name in label_columns(metric_name)]
    return f"{metric_name}{{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs) + "}"


def lines(prefixes: pa.Array, series: np.ndarray, values: np.ndarray, stamps: np.ndarray) -> pa.Buffer:
    """``prefix value timestamp\\n`` for each sample (series index, value, Unix seconds), as one buffer."""
    newline, space, nothing = (pa.scalar(c, pa.large_string()) for c in ("\n", " ", ""))
    text = pc.binary_join_element_wise(
        pc.take(prefixes, pa.array(series)), pc.cast(pa.array(values, pa.float64()), pa.large_string()),
        pc.binary_join_element_wise(pc.cast(pa.array(stamps, pa.float64()), pa.large_string()), newline, nothing),
        space)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)
    return text.buffers()[2][int(offsets[0]):int(offsets[len(text)])]


def block_seconds(max_block_duration: str | None) -> float:
    """The block length promtool makes of ``--max-block-duration`` (``2h`` to ``486h``...): the
    longest of 2 h times a power of 3 that fits, as Prometheus' own compaction ranges go."""
    hours = float(max_block_duration.rstrip("h")) if max_block_duration else 2.0
    k = 0
    while 2 * 3 ** (k + 1) <= hours and k < 9:
        k += 1
    return 2 * 3 ** k * 3600.0


class BlockWriter:
    """Append samples; files of at most ``samples_per_file`` of them (or one ``add``) become TSDB
    blocks under ``data``, up to ``jobs`` promtool runs in the background while the next file fills.
    ``close()`` waits for the last.

    promtool reads its whole file once per block window the file touches: a caller that writes in
    time order starts a new file at each window (``window_of``, ``next_file``)."""

    def __init__(self, data: Path, prefixes: pa.Array, max_block_duration: str | None = None,
                 samples_per_file: int = SAMPLES_PER_FILE, jobs: int = 1) -> None:
        """``jobs``: promtool runs at once (each maps its file: memory grows with them)."""
        self.data, self.prefixes, self.limit = data, pa.array(prefixes, pa.large_string()), samples_per_file
        self.extra = [f"--max-block-duration={max_block_duration}"] if max_block_duration else []
        self.window_s = block_seconds(max_block_duration)
        self.promtool = require_binary("promtool")
        data.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=".backfill-", dir=data.parent))
        self.file, self.in_file, self.files, self.samples, self.jobs = None, 0, 0, 0, max(1, jobs)
        self.running: list[tuple[subprocess.Popen, Path]] = []

    def add(self, series: np.ndarray, values: np.ndarray, stamps: np.ndarray) -> None:
        """Samples in time order per series (NaN values are absent samples and skipped)."""
        keep = ~np.isnan(values)
        series, values, stamps = series[keep], values[keep], stamps[keep]
        if not len(values):
            return
        if self.file is not None and self.in_file + len(values) > self.limit:
            self._hand_over()
        if self.file is None:
            self.file = open(self.tmp / f"part{self.files}.om", "wb")
        self.file.write(lines(self.prefixes, series, values, stamps))
        self.in_file += len(values)
        self.samples += len(values)

    def window_of(self, timestamp: float) -> int:
        return int(timestamp // self.window_s)

    def next_file(self) -> None:
        """What was added so far goes to promtool; later samples start a new file."""
        if self.file is not None:
            self._hand_over()

    def _hand_over(self) -> None:
        self.file.write(b"# EOF\n")
        self.file.close()
        path, self.file, self.in_file = Path(self.file.name), None, 0
        while len(self.running) >= self.jobs:
            self._wait()
        argv = [self.promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet", *self.extra, str(path),
                str(self.data)]
        self.running.append((subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), path))
        self.files += 1

    def _wait(self) -> None:
        """Wait for the oldest promtool run."""
        proc, path = self.running.pop(0)
        _, err = proc.communicate()
        path.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise RuntimeError(f"promtool backfill of {path.name} failed: {err.decode(errors='replace')[-2000:]}")

    def close(self) -> None:
        """Hand over the last file and wait for promtool."""
        try:
            if self.file is not None:
                self._hand_over()
            while self.running:
                self._wait()
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop promtool, drop the files not handed over (blocks already written stay)."""
        if self.file is not None:
            self.file.close()
            self.file = None
        for proc, _ in self.running:
            proc.kill()
            proc.wait()
        self.running = []
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "BlockWriter":
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.abort() if exc_type is not None else self.close()


def backfill(frame_or_parquet, workdir: Path, max_block_duration: str | None = None) -> Path:
    """Turn a series frame (FORMATS.md; a DataFrame or a Parquet path) into TSDB blocks under
    ``workdir/data``, where ``start_prometheus(config, workdir)`` finds them; query the frame's own
    time range (e.g. 2026-01-01 for ``sim series``)."""
    import pandas as pd

    frame = pd.read_parquet(frame_or_parquet) if isinstance(frame_or_parquet, (str, Path)) else frame_or_parquet
    frame = frame.sort_values("timestamp", kind="stable")
    labels = [c for c in frame.columns if c not in ("timestamp", "value", "metric", "node")]
    keys = frame[["metric", "node", *labels]].astype(object)
    keys = keys.where(keys.notna(), "").astype(str)
    ids = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    first = keys.assign(_id=ids).drop_duplicates("_id").sort_values("_id")
    prefixes = [series_prefix(r["metric"], r["node"], r) for r in first.to_dict("records")]
    data = workdir / "data"
    with BlockWriter(data, prefixes, max_block_duration) as writer:
        writer.add(ids, frame["value"].to_numpy(dtype=float), frame["timestamp"].to_numpy(dtype=float))
    return data
