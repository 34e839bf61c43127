"""Link-health verdicts per port from the exporter's own sweeps (``thresholds.py`` has the rules and
their sources). Kept in the exporter rather than in recording rules because a verdict needs the link's
rate and its partner's counters together, which the sweep has in one place and PromQL would join
across two series by partner labels; the cost is that a restart forgets the windows (fatal moves and the
12-minute window refill within 12 minutes)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Mapping

from lockstep.exporters.switches.thresholds import DEFAULT, Thresholds

Key = tuple[str, int]   # (guid, port)
FATAL = {"LinkDownedCounter": "link_downed", "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun",
         "LocalLinkIntegrityErrors": "local_link_integrity"}


@dataclass(frozen=True, slots=True)
class Verdict:
    state: str                   # ok | degraded | failed
    reasons: tuple[str, ...] = ()


class History:
    """Each port's counters at each sweep, as far back as the longest window. A counter that goes back
    (a reset on the switch) starts that port's history again."""

    def __init__(self, thresholds: Thresholds = DEFAULT) -> None:
        self.thresholds = thresholds
        self._ports: dict[Key, deque[tuple[float, Mapping[str, int]]]] = {}

    def observe(self, when: float, readings: Iterable[tuple[Key, Mapping[str, int]]]) -> None:
        keep = max(self.thresholds.long_window_s, self.thresholds.fatal_window_s) + 60
        for key, values in readings:
            past = self._ports.setdefault(key, deque())
            # Only a counter read in both sweeps can tell a reset: one missing from this block (a line
            # that did not read) is not a counter gone to zero.
            if past and any(k in values and values[k] < v for k, v in past[-1][1].items()):
                past.clear()
            past.append((when, values))
            while past and past[0][0] < when - keep:
                past.popleft()

    def increase(self, key: Key, counter: str, window_s: float) -> float | None:
        past = self._ports.get(key)
        if not past or counter not in past[-1][1]:
            return None
        now, latest = past[-1]
        base = past[0][1]   # the last reading at or before the window's start, else the oldest
        for when, values in past:
            if when > now - window_s:
                break
            base = values
        return float(latest[counter] - base.get(counter, latest[counter]))


def judge(history: History, key: Key, rate_bps: float | None, expected_bps: float | None,
          partner: Key | None) -> Verdict:
    th = history.thresholds
    failed = [name for counter, name in FATAL.items() if (history.increase(key, counter, th.fatal_window_s) or 0) > 0]
    if partner is not None and (history.increase(partner, "LinkDownedCounter", th.fatal_window_s) or 0) > 0:
        failed.append("partner_link_downed")
    if failed:
        return Verdict("failed", tuple(failed))
    degraded = []
    if rate_bps:
        for window, name in ((th.short_window_s, "symbol_ber_12m"), (th.long_window_s, "symbol_ber_125m")):
            errors = history.increase(key, "SymbolErrorCounter", window)
            if errors is not None and errors > th.ber_budget * rate_bps * window:
                degraded.append(name)
    recoveries = history.increase(key, "LinkErrorRecoveryCounter", 60.0)
    if recoveries is not None and recoveries > th.link_error_recovery_per_minute:
        degraded.append("link_error_recovery")
    if expected_bps is not None and rate_bps is not None and rate_bps < expected_bps:
        degraded.append("rate_below_expected")
    return Verdict("degraded", tuple(degraded)) if degraded else Verdict("ok")
