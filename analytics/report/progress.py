"""A dependency-free progress bar on stderr for the report's queries."""
from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """``tick(label)`` advances one unit. On a terminal the bar redraws in place; in a log (not a tty)
    it prints one line per tenth so CI output stays short."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total, self.done, self.width = max(total, 1), 0, width
        self.stream = stream or sys.stderr
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_decile = -1

    def tick(self, label: str = "") -> None:
        self.done = min(self.done + 1, self.total)
        filled = self.width * self.done // self.total
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {label}"
        if self._tty:
            self.stream.write("\r" + line.ljust(self.width + 40))
            if self.done == self.total:
                self.stream.write("\n")
        elif (decile := 10 * self.done // self.total) != self._last_decile:
            self._last_decile = decile
            self.stream.write(line + "\n")
        self.stream.flush()
