"""A moment given on a command line: ``now``, Unix seconds, or an RFC 3339 time with its zone."""
from __future__ import annotations

import time
from datetime import datetime


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
