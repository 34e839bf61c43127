"""Times as operators write them: a moment on a command line (``now``, Unix seconds, or an RFC 3339
time with its zone), and a Prometheus duration (``30s``, ``1h30m``, ``500ms``)."""
from __future__ import annotations

import re
import time
from datetime import datetime

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_time(text: str, flag: str) -> float:
    """Unix seconds; ValueError naming ``flag`` for anything else, and for a time without its zone
    (whose meaning would depend on the machine it runs on)."""
    if text == "now":
        return time.time()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: want 'now', Unix seconds or an RFC 3339 time "
                         "(2026-01-01T00:00:00Z)") from None
    if moment.tzinfo is None:
        raise ValueError(f"{flag} {text!r}: an RFC 3339 time needs its zone (Z or +hh:mm)")
    return moment.timestamp()


def duration_seconds(text: str) -> float:
    """A Prometheus duration in seconds; ValueError for anything else."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNITS[u] for n, u in parts)
