"""Numbered lines of a tool's output, with launcher output tags removed."""
from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator

if TYPE_CHECKING:
    from lockstep.validation.model import ParseError

# `mpirun --tag-output` prefixes "[1,0]<stdout>:"; `srun --label` prefixes "0: " (task number).
_TAG = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")


class Lines:
    """A tool's output line by line: (1-based line number, line without its launcher tag or trailing
    whitespace), from a text or an open file, never split or read whole, so a parser of a table keeps
    only what it needs as the lines go by. Lines end at newlines only: a carriage return (a progress
    display, gpu-burn's) stays inside its line. ``finish`` reads whatever is left and says where the
    output ends; an empty output, or a NUL byte anywhere (binary data), is reported before any other
    error."""

    def __init__(self, raw: Iterable[str], source: str) -> None:
        self.source = source
        self._raw = iter(raw)
        self._number = 0
        self._last = 0          # the last line with any character in it
        self._text = False      # anything but whitespace seen

    @classmethod
    def of_text(cls, text: str, source: str) -> "Lines":
        return cls(_split(text), source)

    @classmethod
    def of_file(cls, f: BinaryIO, source: str, max_bytes: int) -> "Lines":
        return cls(_read_lines(f, source, max_bytes), source)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        from lockstep.validation.model import ParseError
        for raw in self._raw:
            self._number += 1
            if raw:
                self._last = self._number
                if "\x00" in raw:
                    raise ParseError(self.source, self._number, "binary data, not a tool's text output")
                self._text = self._text or not raw.isspace()
            yield self._number, _TAG.sub("", raw, count=1).rstrip()

    def fail(self, number: int, reason: str) -> "ParseError":
        """The error to raise for line ``number``, once the rest is read: an empty or binary output is
        still reported as such first."""
        from lockstep.validation.model import ParseError
        self.finish()
        return ParseError(self.source, number, reason)

    def finish(self) -> int:
        """The number of the output's last line, once the rest is read (ParseError if it is empty or
        binary: those outranked every other error when the whole text was checked first)."""
        from lockstep.validation.model import ParseError
        for _ in self:
            pass
        if not self._text:
            raise ParseError(self.source, 1, "empty output")
        return max(1, self._last)


def _split(text: str) -> Iterator[str]:
    """``text.split("\n")``, one piece at a time."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _read_lines(f: BinaryIO, source: str, max_bytes: int) -> Iterator[str]:
    """The lines of ``f`` as ``_split`` gives a text's (split at newlines only, bytes that are not UTF-8
    replaced), read a line at a time; ParseError past ``max_bytes``."""
    from lockstep.validation.model import ParseError
    too_big = f"larger than {max_bytes >> 20} MiB: not one tool run's output"
    try:
        if os.fstat(f.fileno()).st_size > max_bytes:
            raise ParseError(source, 1, too_big)
    except (AttributeError, OSError):
        pass   # not a file on disk (a pipe): counted while reading
    left = max_bytes
    while True:
        raw = f.readline(left + 1)
        left -= len(raw)
        if left < 0:
            raise ParseError(source, 1, too_big)
        if not raw.endswith(b"\n"):
            yield raw.decode(errors="replace")
            return
        yield raw[:-1].decode(errors="replace")


def require_text(text: str, source: str) -> None:
    from lockstep.validation.model import ParseError
    if not text.strip():
        raise ParseError(source, 1, "empty output")
    if "\x00" in text:
        raise ParseError(source, text[: text.index("\x00")].count("\n") + 1, "binary data, not a tool's text output")


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
    except RecursionError:
        raise ParseError(source, offset + 1, "JSON nested too deeply") from None
    except ValueError as exc:   # a number Python cannot hold (an integer of more than 4,300 digits)
        raise ParseError(source, offset + 1, f"invalid JSON ({str(exc)[:80]})") from None
    if not isinstance(doc, dict):
        raise ParseError(source, offset + 1, "the JSON document is not an object")
    return doc, offset + 1
