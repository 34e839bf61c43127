"""Counters as the kernel prints them, checked before ``int()``: ``str.isdigit()`` accepts "²" (which
``int()`` refuses) and ``int()`` accepts "٣" and numbers of 4,300 digits. One corrupt token must
cost its line's item, never the whole file."""
from __future__ import annotations

U64_DIGITS = 20  # 18446744073709551615


def uint(token: str) -> int:
    """An unsigned counter: ASCII digits only, at most 20 of them (u64); ValueError otherwise."""
    if not (token.isascii() and token.isdigit() and len(token) <= U64_DIGITS):
        raise ValueError(f"not an unsigned counter: {token[:24]!r}")
    return int(token)


def is_uint(token: str) -> bool:
    return token.isascii() and token.isdigit() and len(token) <= U64_DIGITS
