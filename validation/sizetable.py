"""The rows of a tool's table per message size (nccl-tests, perftest), kept bounded however long the
table: every row while there are at most ``MAX_ROWS`` (a sweep by powers of two from 8 B to 16 GiB is
32 rows), past that one row per power of two of the message size, the smallest size of each, as a
sweep by a factor of two would have printed, and the largest size's. The figures are computed from
every row as it is read; these rows are what a result keeps of its table (``detail``), with the
number of rows read."""
from __future__ import annotations

from typing import Callable

MAX_ROWS = 64
SUMMARY = "the smallest message size of each power of two, and the largest"


class SizeTable:
    """``replaces(new, old)``: whether a row replaces the one kept for the same size (perftest keeps a
    size's lower bandwidth, reported by server and client); None: rows of one size are each kept."""

    def __init__(self, replaces: Callable[[dict, dict], bool] | None = None, limit: int = MAX_ROWS) -> None:
        self.replaces, self.limit = replaces, limit
        self.count = 0                                   # rows read
        self._rows: dict | None = {}                     # every row (by size when rows of a size merge)
        self._buckets: dict[int, dict] = {}              # once summarised: power of two -> its smallest size's row
        self._largest: dict | None = None

    def add(self, row: dict) -> None:
        self.count += 1
        if self._rows is not None:
            key = row["size_bytes"] if self.replaces else self.count
            old = self._rows.get(key)
            if old is not None:
                if self.replaces(row, old):
                    self._rows[key] = row
                return
            if len(self._rows) < self.limit:
                self._rows[key] = row
                return
            self._summarise()
        self._keep(row)

    def rows(self) -> list[dict]:
        if self._rows is not None:
            return list(self._rows.values())
        kept = list(self._buckets.values())
        if self._largest is not None and all(r is not self._largest for r in kept):
            kept.append(self._largest)
        return sorted(kept, key=lambda r: r["size_bytes"])

    def summary(self) -> dict:
        """What ``detail`` says of the rows left out: nothing when every row is kept."""
        return {} if self._rows is not None else {"row_count": self.count, "rows_kept": SUMMARY}

    def _summarise(self) -> None:
        rows, self._rows = self._rows, None
        for row in rows.values():
            self._keep(row)

    def _keep(self, row: dict) -> None:
        size = row["size_bytes"]
        bucket = size.bit_length()            # 0 for size 0, then one per power of two
        self._buckets[bucket] = self._better(row, self._buckets.get(bucket), smallest=True)
        self._largest = self._better(row, self._largest, smallest=False)

    def _better(self, row: dict, old: dict | None, smallest: bool) -> dict:
        if old is None:
            return row
        if row["size_bytes"] == old["size_bytes"]:
            return row if self.replaces is not None and self.replaces(row, old) else old
        return row if (row["size_bytes"] < old["size_bytes"]) == smallest else old
