"""Why a rank runs slower than its peers: its own hardware, or nothing the stack can see (pure, over
``lockstep.analytics.frame.features`` matrices).

A rank's hardware explains its slowness when, over the samples it is judged on, it holds a clock-event
reason other than the job-wide power cap (a thermal or hardware slowdown, the power brake) on most of
them, its SM clock sits below its peers' (the job's median, at the same work: its ranks run one model)
by clearly more than the job's spread of clocks and by enough to explain at least half of its
slowness, its PCIe link runs narrower than it trained for on most of them, or it has logged a hardware
XID: the cause is ``hardware`` and the node is one to drain. With none of these its pace is all there
is (``transient`` for a straggler, ``work`` for imbalance). Heat alone (hot, its clock as its peers'),
a clock deficit that explains less than half of the slowness, or a reason held on only part of the
samples is mixed evidence: ``unknown``.

``sw_power_cap`` is never hardware evidence: on a busy job most GPUs hold it most of the time, and a
cluster-wide cap is the job-wide slowdown's business (``lockstep.analytics.scoring.slowdown``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lockstep.analytics.frame.features import REASON_PREFIX
from lockstep.analytics.scoring import relative
from lockstep.exporters.catalog.enums import HARDWARE, POWER_CAP_REASON, UNKNOWN

K = 4.0                 # the job's spreads of clock levels a clock deficit must reach...
CLOCK_FLOOR = 0.05      # ...and at least this (log ≈ relative), as the straggler scorer's clock signal
EXPLAINS = 0.5          # a clock deficit explains the slowness when it is at least this share of it (log)
MOST, SOME = 0.5, 0.2   # a reason or a narrow link held on most samples is evidence; on some, a hint
# Where data-centre GPUs begin to slow their clocks for heat (H100, A100). Only an absolute figure: a rank
# busier than its peers (slower, or its peers waiting for it) runs warmer than they do whatever its cause.
HOT_C = 85.0


@dataclass(frozen=True)
class Hardware:
    """A job's hardware signals, times × GPUs: what ``judge`` weighs."""

    reasons: dict[str, np.ndarray]   # per clock-event reason other than sw_power_cap: held (bool)
    clock_gap: np.ndarray            # log of the peers' median clock over the GPU's (> 0: slower); NaN: unknown
    clock_bar: float                 # the clock gap that is clearly below the peers
    temp: np.ndarray                 # celsius, NaN where absent
    hot: np.ndarray                  # at its slowdown temperature
    pcie: np.ndarray                 # its PCIe link narrower than its maximum
    xid: np.ndarray                  # it has logged a hardware XID

    @property
    def held(self) -> np.ndarray:
        """Any hardware reason held (times × GPUs)."""
        return np.logical_or.reduce(list(self.reasons.values())) if self.reasons else np.zeros_like(self.hot)

    def strong(self, pace: np.ndarray) -> np.ndarray:
        """times × GPUs: evidence that would explain a slowness of ``pace`` (log, per sample) by itself now."""
        with np.errstate(invalid="ignore"):
            clock = (self.clock_gap >= self.clock_bar) & (self.clock_gap >= EXPLAINS * pace)
        return self.held | clock | self.pcie | self.xid


def hardware(sig: dict[str, np.ndarray], active: np.ndarray) -> Hardware:
    """The hardware signals of one job's columns (``sig``: its matrices); ``active``: samples that count."""
    shape = sig["clock"].shape
    reasons = {name[len(REASON_PREFIX):]: np.nan_to_num(m) > 0 for name, m in sig.items()
               if name.startswith(REASON_PREFIX) and name[len(REASON_PREFIX):] != POWER_CAP_REASON}
    with np.errstate(divide="ignore", invalid="ignore"):
        clock = np.where(sig["clock"] > 0, sig["clock"], np.nan)
        gap = -relative.log_level(np.where(active[:, None], clock, np.nan))
    bar = relative.bar(relative.robust_scale(gap), K, CLOCK_FLOOR)
    temp = sig.get("temp", np.full(shape, np.nan)).astype(float)
    with np.errstate(invalid="ignore"):
        hot = temp >= HOT_C
    present = {name: np.nan_to_num(sig.get(name, np.zeros(shape))) > 0 for name in ("pcie", "xid")}
    return Hardware(reasons, gap, bar, temp, hot, present["pcie"], present["xid"])


def judge(hw: Hardware, rows: np.ndarray, j: int, pace: float, otherwise: str) -> tuple[str, dict]:
    """The cause of column ``j``'s slowness over ``rows`` (bool per sample) and the evidence behind it;
    ``pace``: how much slower it is (log, > 0); ``otherwise``: the cause when no hardware shows."""
    if not rows.any():
        return otherwise, {}
    share = {name: float(held[rows, j].mean()) for name, held in hw.reasons.items() if held[rows, j].any()}
    gaps = hw.clock_gap[rows, j]
    gap = float(np.nanmedian(gaps)) if np.isfinite(gaps).any() else np.nan
    temps = hw.temp[rows, j]
    ev: dict = {}
    if share:
        ev["clock_event_reasons"] = {name: round(s, 3) for name, s in sorted(share.items())}
    if np.isfinite(gap):
        ev["clock_vs_peers"] = round(float(np.exp(-gap)), 3)
    if np.isfinite(temps).any():
        ev["temperature_celsius"] = round(float(np.nanmedian(temps)), 1)
    pcie, xid, hot = (float(m[rows, j].mean()) for m in (hw.pcie, hw.xid, hw.hot))
    if pcie:
        ev["pcie_link_degraded"] = round(pcie, 3)
    if xid:
        ev["hardware_xid"] = True
    clock_low = np.isfinite(gap) and gap >= hw.clock_bar
    strong = {"clock_event_reasons": max(share.values(), default=0.0) >= MOST, "pcie_link_degraded": pcie >= MOST,
              "hardware_xid": xid > 0, "clock_vs_peers": clock_low and gap >= EXPLAINS * max(pace, 0.0)}
    hints = {"clock_event_reasons": max(share.values(), default=0.0) >= SOME, "pcie_link_degraded": pcie >= SOME,
             "clock_vs_peers": clock_low, "temperature_celsius": hot >= MOST}
    found = sorted(k for k, v in strong.items() if v)
    if found:
        return HARDWARE, {**ev, "explained_by": found}
    hinted = sorted(k for k, v in hints.items() if v)
    if hinted:
        return UNKNOWN, {**ev, "hinted_by": hinted}
    return otherwise, ev


def combined(causes: list[str], otherwise: str) -> str:
    """A node's cause from its slow GPUs': the one they all share, else ``unknown`` (none: ``otherwise``)."""
    found = set(causes)
    return found.pop() if len(found) == 1 else UNKNOWN if found else otherwise
