"""Numbered lines of a tool's output, with launcher output tags removed."""
from __future__ import annotations

import json
import re
from typing import Iterator

# `mpirun --tag-output` prefixes "[1,0]<stdout>:"; `srun --label` prefixes "0: " (task number).
_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")


def numbered(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its launcher tag or trailing whitespace). Lines end at
    newlines only: a carriage return (a progress display, gpu-burn's) stays inside its line."""
    for number, line in enumerate(text.split("\n"), 1):
        yield number, _TAG.sub("", line, count=1).rstrip()


def require_text(text: str, source: str) -> None:
    from lockstep.validation.model import ParseError
    if not text.strip():
        raise ParseError(source, 1, "empty output")
    if "\x00" in text:
        raise ParseError(source, text[: text.index("\x00")].count("\n") + 1, "binary data, not a tool's text output")


def last_line(text: str) -> int:
    return max(1, len(text.rstrip("\n").split("\n")))


def scaled(token: str, exponent: int) -> float | None:
    """``token`` times 10**exponent, exactly as printed ("68.4048" GB/s -> 68404800000.0, not ...799.99)."""
    return to_float(f"{token}e{exponent}") if to_float(token) is not None else None


def to_float(token: str) -> float | None:
    """A number as the tools print it, or None for N/A and the like."""
    try:
        return float(token)
    except ValueError:
        return None


def json_document(text: str, source: str, what: str) -> tuple[dict, int]:
    """The JSON object in ``text`` (tools print notes before it) and the line it starts on."""
    from lockstep.validation.model import ParseError
    start = text.find("{")
    if start < 0:
        raise ParseError(source, 1, f"no JSON document (not {what} output)")
    offset = text.count("\n", 0, start)
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError(source, offset + exc.lineno, f"invalid JSON ({exc.msg}; truncated?)") from None
    if not isinstance(doc, dict):
        raise ParseError(source, offset + 1, "the JSON document is not an object")
    return doc, offset + 1
