"""How much of one Prometheus answer is read: at most ``--prometheus-max-answer-size`` bytes, counted
after decompression as the body comes in, so a small gzip body inflating to gigabytes, or a valid
answer padded to any length, costs no more than the cap and fails the query that asked for it.

The default for ``lockstep analytics serve`` is sized for the largest answer it asks for, a piece of a
job's window (at most ``lockstep.analytics.service.fetch.SAMPLES_PER_QUERY`` samples, and a label set per series), with
room for longer labels and larger jobs (``bench/bench_refresh.py`` measures the answers). The monthly
report asks for a month of per-GPU counters at its coarse step in one answer, so its default is larger.
"""
from __future__ import annotations

import re

import aiohttp

from lockstep.analytics.prom.errors import AnswerTooLarge

SERVE_DEFAULT = 128 << 20
REPORT_DEFAULT = 1 << 30
FLAG = "--prometheus-max-answer-size"
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3}


def parse_size(text: str) -> int:
    """``128MiB``, ``1GiB``, ``500MB`` or a number of bytes (ValueError naming the flag otherwise)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m[2].lower() if m else ""
    if m is None or unit not in _UNITS or not 0 < float(m[1]) * _UNITS[unit] < 1 << 62:
        raise ValueError(f"{FLAG} {text!r}: want a size such as 128MiB, 1GiB or a number of bytes")
    return int(float(m[1]) * _UNITS[unit])


def describe(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"


def add_flag(parser, default: int) -> None:
    parser.add_argument(FLAG, dest="max_answer_bytes", type=parse_size, default=default, metavar="SIZE",
                        help=f"stop reading a Prometheus answer past this size, counted decompressed "
                             f"(default {describe(default)}); the query that asked for it fails")


async def read_answer(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body of ``resp`` (decompressed); AnswerTooLarge as soon as it is past ``max_bytes``, the rest
    unread and the connection closed."""
    announced = resp.content_length if "Content-Encoding" not in resp.headers else None
    if announced is not None and announced > max_bytes:
        resp.close()
        raise AnswerTooLarge(f"the answer announces {announced} bytes, more than {describe(max_bytes)} ({FLAG})")
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > max_bytes:
            resp.close()
            raise AnswerTooLarge(f"the answer is larger than {describe(max_bytes)} ({FLAG}); not read further")
        chunks.append(chunk)
    return b"".join(chunks)
