"""A username and password read from a config's files or the environment, never shown: its ``repr`` (and so a
traceback's locals or a logged object) hides the password."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never print the secret, even in a traceback's locals
        return f"Credentials(username={self.username!r}, password=<hidden>)"
