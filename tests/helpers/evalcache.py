"""Each simulated scenario evaluated once per test session, however many test modules and xdist workers ask.

``lockstep.analytics.evaluation.evaluate.evaluate(path)`` simulates a scenario and scores it (seconds each,
tens for the largest); the evaluation, scoring and harness tests ask for the same scenarios again and again.
:class:`EvalCache` computes each one once, pickles ``(run, results, report)`` into a folder the workers of
one session share (tests/analytics/conftest.py: ``evaluation``), and hands every caller a fresh unpickled
copy, so no test can change what another one reads. A file lock per scenario makes a second worker wait for
the first instead of computing it again. The folder lives under the session's base temporary directory,
so every session computes from the code it tests, never from an earlier session's results.

The key is the scenario file's content (and its name), not its path: the harness tests copy scenarios into
a temporary folder, and the result of ``evaluate`` depends on the file's text alone.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path

from lockstep.analytics.evaluation.evaluate import evaluate


class EvalCache:
    """``evaluate`` (the real function by default) once per scenario, shared through ``directory``."""

    def __init__(self, directory: Path, evaluator: Callable = evaluate) -> None:
        self.directory = directory
        self.evaluator = evaluator
        directory.mkdir(parents=True, exist_ok=True)

    def evaluate(self, path: str | Path):
        """``evaluator(path)``: a fresh copy of the session's one result for this scenario's text."""
        return pickle.loads(self._pickled(Path(path)))

    def _pickled(self, path: Path) -> bytes:
        key = f"{path.stem}-{hashlib.sha256(path.read_bytes()).hexdigest()[:20]}"
        stored = self.directory / f"{key}.pickle"
        with open(self.directory / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)          # released when the file closes, also on an error
            if stored.exists():
                return stored.read_bytes()
            data = pickle.dumps(self.evaluator(path), protocol=pickle.HIGHEST_PROTOCOL)
            partial = stored.with_suffix(f".{os.getpid()}.part")
            partial.write_bytes(data)
            partial.replace(stored)                   # whole or absent for a reader that does not lock
            return data


def session_directory(basetemp: Path) -> Path:
    """The folder one session's workers share: under xdist each worker's base temporary directory is
    ``<session>/popen-gwN``, so their parent; without xdist the session's own base temporary directory."""
    return (basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp) / "evaluations"
