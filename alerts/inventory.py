"""The quarantine receiver's node inventory: the names of the nodes it may drain, one per line
(``#`` comments), as ``sinfo -h -N -o %N | sort -u`` prints them. Alertmanager's API takes alerts
with any labels from anyone who reaches it, so a ``node`` label is only a claim: a name missing here
is refused before it reaches ``scontrol`` or spends the hourly cap. Names match case-insensitively
(hostnames are: RFC 4343) and are drained as the inventory spells them. The file is read again when
it changes, so a cron job or the Slurm controller's hook can keep it current."""
from __future__ import annotations

import os
from pathlib import Path


class InventoryError(Exception):
    """The inventory cannot be read, or lists no node: nothing may be drained."""


class Inventory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._names: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        try:
            stat = os.stat(self.path)
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._names = parse_inventory(self.path.read_text(errors="replace"))
                self._stamp = stamp
        except OSError as exc:
            raise InventoryError(f"node inventory {self.path}: {exc.strerror or exc}") from None
        if not self._names:
            raise InventoryError(f"node inventory {self.path} lists no node")
        return self._names

    def lookup(self, node: str) -> str | None:
        """The inventory's spelling of ``node``, None when it is not a node of this cluster."""
        return self._load().get(node.casefold())

    def size(self) -> int:
        return len(self._load())


def parse_inventory(text: str) -> dict[str, str]:
    """``{casefolded name: name}`` of the non-blank, non-comment lines."""
    names = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {name.casefold(): name for name in names if name}
