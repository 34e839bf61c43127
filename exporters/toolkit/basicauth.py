"""HTTP basic auth against the bcrypt hashes of the exporter-toolkit web config, safe to expose.

bcrypt is slow on purpose (tens to hundreds of milliseconds of CPU per check at the usual costs), so every wrong password
is an attacker's lever. The checks run on an executor of their own, one at a time, with at most
``MAX_PENDING`` waiting: a flood of bad passwords gets 503 answers instead of queueing on the
shared default executor, where it delayed every scrape that renders in a thread by hundreds of times
its own cost. Credentials once verified are remembered, so
a good scrape costs one bcrypt check per process lifetime. An unknown user is checked against a
dummy hash of the same cost, so timing does not tell which users exist; a password past bcrypt's
72 bytes is refused without a check (bcrypt >= 5 raises on it)."""
from __future__ import annotations

import asyncio
import base64
import hashlib
from concurrent.futures import ThreadPoolExecutor
from enum import Enum

import bcrypt

MAX_PENDING = 4
BCRYPT_MAX_BYTES = 72


class Verdict(Enum):
    OK = "ok"
    DENIED = "denied"
    BUSY = "busy"  # too many checks pending: try again later


class BasicAuth:
    def __init__(self, users: dict[str, bytes]) -> None:
        self.users = users
        self._verified: set[bytes] = set()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt")
        self._pending = 0
        self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(max(map(_cost, users.values()), default=4)))

    async def check(self, header: str) -> Verdict:
        credentials = parse_basic(header)
        if credentials is None:
            return Verdict.DENIED
        user, password = credentials
        hashed = self.users.get(user)
        key = hashlib.sha256((hashed or b"") + b"\0" + password).digest()
        if hashed is not None and key in self._verified:
            return Verdict.OK
        if self._pending >= MAX_PENDING:
            return Verdict.BUSY
        self._pending += 1
        try:
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(self._executor, _checkpw, password, hashed or self._dummy)
        finally:
            self._pending -= 1
        if ok and hashed is not None:
            self._verified.add(key)
            return Verdict.OK
        return Verdict.DENIED

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # what a future bcrypt refuses to check is not a match either
        return False


def parse_basic(header: str) -> tuple[str, bytes] | None:
    """(user, password) of an RFC 7617 ``Basic`` header, None when malformed or past bcrypt's limit."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or len(encoded) > 1024:
        return None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    secret = password.encode()
    if not sep or len(secret) > BCRYPT_MAX_BYTES:
        return None
    return user, secret


def _cost(hashed: bytes) -> int:
    """The cost of a ``$2b$12$...`` hash (webconfig accepts only well-formed ones)."""
    try:
        return max(4, min(31, int(hashed.split(b"$")[2])))
    except (IndexError, ValueError):
        return 12
