"""The results directory: one JSON file per node, tool, test and scale, rewritten atomically per run.

Layout: ``DIR/<node>/<kind>/<test>@<scale>.json`` holding ``latest`` (the whole last result), ``baseline``
(its own-history baseline) and ``history`` (time, status and baselined figures of the last runs), plus
``<...>.out`` with the tail of the last run's raw output. A multi-node result is written under every node
it covered, so each node's agent serves it; the directory may be node-local or shared (NFS, Lustre).
Writers serialise on ``DIR/<node>/.lock``; readers (the node agent) never lock: files are replaced by
rename, so a reader sees the old file or the new one, never half of one.

Bounded: ``history_runs`` runs per file, files unchanged for ``max_age_s`` removed, ``max_series``
files per node, and every file at most ``MAX_SERIES_BYTES`` (the oldest history dropped to fit): the
agent of every node a shared directory covers reads them, and skips a larger one unread.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from lockstep.validation.baseline import BaselinePolicy, history_baseline, history_entry
from lockstep.validation.result import Result

log = logging.getLogger("lockstep.validation.store")
DEFAULT_DIR = Path("/var/lib/lockstep/validation")
FORMAT = 1
RAW_TAIL_BYTES = 1 << 20
# What the node agent reads of one series file at most: a result keeps a bounded part of the tool's table
# (validation/sizetable.py), so a file is tens of KB; read whole, a file costs a few times its size in memory.
MAX_SERIES_BYTES = 4 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class StoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class Limits:
    history_runs: int = 400              # per test and scale: more than a year of daily runs
    max_age_s: float = 400 * 86400.0     # a test not run for this long is dropped
    max_series: int = 1000               # tests x scales per node
    baseline: BaselinePolicy = BaselinePolicy()


def series_file(root: Path, node: str, kind: str, test: str, scale: int) -> Path:
    return root / node / kind / f"{_UNSAFE.sub('_', test)}@{scale}.json"


def read_series(path: str | os.PathLike) -> dict:
    """A series file's document; ``ValueError`` if it is not one or is larger than ``MAX_SERIES_BYTES``
    (the agent logs and skips it)."""
    with open(path, "rb") as f:
        data = f.read(MAX_SERIES_BYTES + 1)
    if len(data) > MAX_SERIES_BYTES:
        raise ValueError(f"{path}: larger than {MAX_SERIES_BYTES >> 20} MiB, not read")
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("latest"), dict):
        raise ValueError(f"{path}: not a lockstep validation series (format {FORMAT})")
    return doc


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace ``path`` by rename; ``durable``: on disk before the rename is (fsync), and the rename too."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)   # the rename itself survives a crash
    finally:
        os.close(dir_fd)


def _encode(doc: dict, path: Path) -> bytes:
    """The document as stored, within ``MAX_SERIES_BYTES``: the oldest history dropped until it fits;
    StoreError when the latest result alone does not."""
    while True:
        data = json.dumps(doc, separators=(",", ":")).encode()
        history = doc["history"]
        if len(data) <= MAX_SERIES_BYTES:
            return data
        if len(history) <= 1:
            raise StoreError(f"{path}: the result is {len(data) >> 20} MiB as JSON, more than the "
                             f"{MAX_SERIES_BYTES >> 20} MiB the node agent reads")
        doc["history"] = history[max(1, len(history) // 8):]


@contextmanager
def _locked(node_dir: Path) -> Iterator[None]:
    node_dir.mkdir(parents=True, exist_ok=True)
    with open(node_dir / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class Store:
    """``durable=False`` (the simulator's scratch trees) skips the fsyncs; writes stay atomic renames."""

    def __init__(self, root: Path, limits: Limits = Limits(), durable: bool = True) -> None:
        self.root, self.limits, self.durable = Path(root), limits, durable

    def write(self, result: Result, raw: str | None = None, only: tuple[str, ...] | None = None) -> list[Path]:
        """Store ``result`` under each node it covered (``only``: under these of them, e.g. the node whose
        local directory this is); the paths written."""
        nodes = result.nodes if only is None else tuple(n for n in result.nodes if n in only)
        if not nodes:
            raise StoreError(f"none of {only} is among the result's nodes {result.nodes}")
        return [self._write_node(node, result, raw) for node in nodes]

    def _write_node(self, node: str, result: Result, raw: str | None) -> Path:
        path = series_file(self.root, node, result.kind, result.test, result.scale)
        with _locked(self.root / node):
            previous = self._previous(path, result)
            history = (previous + [history_entry(result)])[-self.limits.history_runs:]
            doc = {"format": FORMAT, "latest": result.to_dict(),
                   "baseline": {"history": history_baseline(history[:-1], self.limits.baseline)},
                   "history": history}
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, _encode(doc, path), self.durable)
            if raw is not None:
                atomic_write(path.with_suffix(".out"), raw.encode(errors="replace")[-RAW_TAIL_BYTES:], self.durable)
            self._prune(self.root / node, keep=path)
        return path

    def _previous(self, path: Path, result: Result) -> list[dict]:
        """History so far; a new series must fit under ``max_series``; an unreadable file is set aside."""
        if not path.exists():
            if len(self._series_files(path.parents[1])) >= self.limits.max_series:
                raise StoreError(f"{path.parents[1]} already holds {self.limits.max_series} tests x scales "
                                 "(Limits.max_series); remove old ones")
            return []
        try:
            doc = read_series(path)
        except (OSError, ValueError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            os.replace(path, aside)
            log.warning("unreadable series file moved aside: %s (%s)", aside, exc)
            return []
        if doc["latest"].get("test") != result.test:
            raise StoreError(f"{path} holds test {doc['latest'].get('test')!r}, not {result.test!r}: "
                             "choose a test name that differs in letters or digits")
        return list(doc.get("history") or [])

    @staticmethod
    def _series_files(node_dir: Path) -> list[Path]:
        return sorted(node_dir.glob("*/*.json")) if node_dir.is_dir() else []

    def _prune(self, node_dir: Path, keep: Path) -> None:
        cutoff = time.time() - self.limits.max_age_s
        for path in self._series_files(node_dir):
            try:
                if path != keep and path.stat().st_mtime < cutoff:
                    path.unlink()
                    path.with_suffix(".out").unlink(missing_ok=True)
            except FileNotFoundError:
                pass

    def node_series(self, node: str) -> list[dict]:
        """Every readable series document of ``node`` (the report's input), sorted by kind and test."""
        docs = []
        for path in self._series_files(self.root / node):
            try:
                docs.append(read_series(path))
            except (OSError, ValueError) as exc:
                log.warning("skipping %s: %s", path, exc)
        return docs

    def nodes(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
