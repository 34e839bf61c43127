"""A query window and its grid of sample times: ``start``, ``start + step``, ... up to ``end``.

Every answer of a window lands on its grid (``query_range`` evaluates exactly there), so a row index
names the same instant in every query of the window, in a piece of it (``chunks``), and in the next
window of the service (windows end on multiples of the step).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float

    @property
    def rows(self) -> int:
        return max(0, int(np.floor((self.end - self.start) / self.step + 1e-6)) + 1)

    def times(self) -> np.ndarray:
        return self.start + np.arange(self.rows) * self.step

    def row_of(self, times: np.ndarray) -> np.ndarray:
        """Grid rows of ``times``; -1 for a time off the grid (by more than a millisecond) or outside it."""
        at = (np.asarray(times, dtype=float) - self.start) / self.step
        rows = np.rint(at)
        ok = (np.abs(at - rows) * self.step < 1.5e-3) & (rows >= 0) & (rows < self.rows)
        return np.where(ok, rows, -1).astype(np.int64)

    def sub(self, first: int, count: int) -> Window:
        """Rows ``first`` .. ``first + count - 1`` of this grid, as a window of their own."""
        return Window(self.start + first * self.step, self.start + (first + count - 1) * self.step, self.step)

    def chunks(self, rows_per_chunk: int) -> list[tuple[int, Window]]:
        """The grid in pieces of at most ``rows_per_chunk`` rows, each with its first row."""
        per = max(1, rows_per_chunk)
        return [(first, self.sub(first, min(per, self.rows - first))) for first in range(0, self.rows, per)]
