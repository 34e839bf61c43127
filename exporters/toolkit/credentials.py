"""A username and password read from a config's files or the environment, never shown: its ``repr`` (and so a
traceback's locals or a logged object) hides the password."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:  # never print the secret, even in a traceback's locals
        return f"Credentials(username={self.username!r}, password=<hidden>)"

    def basic_header(self) -> str:
        """The ``Authorization`` value of RFC 7617 Basic credentials (UTF-8)."""
        return basic_auth(self.username, self.password)


def basic_auth(username: str, password: str) -> str:
    """RFC 7617 Basic credentials (UTF-8) as an ``Authorization`` value: ``Basic`` and ``basic_token``."""
    return "Basic " + basic_token(username, password)


def basic_token(username: str, password: str) -> str:
    """The base64 of ``user:password`` (UTF-8), as it travels in a Basic ``Authorization`` header."""
    return base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
