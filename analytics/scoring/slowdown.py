"""Job-wide slowdowns: every rank of a job running slower than the job's own recent baseline, no stall
(pure, over ``lockstep.analytics.scoring.stall.JobSignals`` and the feature matrices).

The job's pace is the rate its GPUs do their tensor work: the median over its ranks of compute
activity times the SM clock against its maximum (a rank at 0.85x clock and busy all the time works
at 0.85x). A lower work rate is what every infrastructure slowdown costs: the ranks wait for input
(activity falls), for the fabric (their all-reduce takes longer: activity falls), or a cap holds
their clocks (the clock falls, activity does not). A job doing more work per step at unchanged clocks
keeps its rate: that is the model, not a slowdown.

Per sample, while the job runs (no stall, no straggler holding it back, not idle), its pace averaged
over ``SMOOTH_S`` is compared with its baseline: the median of its clean samples (running, not slowed)
over the ``BASELINE_S`` before (kept while a slowdown lasts longer than that). It is slowed when the
pace falls below the baseline by ``K`` of the job's own spread of it (robust, over its clean samples so
far) and at least ``FLOOR``, for ``PERSIST_S``; the run that led to it counts from its start. What it
costs per sample is ``1 - pace / baseline`` of the job's GPU time. Its cause, from evidence decided in
this order and taken by majority over the slowdown: a checkpoint (a write burst), the fabric (PFC pause
time, the transmit wait or congestion notifications well above the clean baseline, a link down or
flapping on the job's rails), a cap on every GPU (the job's median SM clock down by ``CLOCK_DROP``
against its clean baseline, or a thermal or hardware slowdown on most GPUs: ``power``), the job's input
(``storage``: the job reads its data as it goes, or its cgroup stalls on I/O, and where ranks export their
own step time, their steps take no longer: the time goes outside them, waiting), else ``unknown``. A slowdown
never pages: it is in the API, the reports and the loss ledger.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import REASON_PREFIX
from lockstep.analytics.scoring import relative, stall
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.exporters.catalog.enums import CHECKPOINT, NETWORK, POWER, POWER_CAP_REASON, STORAGE, UNKNOWN

SMOOTH_S = 30.0       # the pace averaged over this span (a job's steps jitter)
BASELINE_S = 600.0    # the job's baseline: its clean samples over this span before
READY_S = 60.0        # ...judged against once it holds this much
K = 4.0               # the job's spreads of its smoothed pace a fall must reach...
FLOOR = 0.08          # ...and at least this (log ≈ relative)
PERSIST_S = 60.0      # consecutive running seconds below the bar before a slowdown is reported
CLOCK_DROP = 0.05     # the job's median clock this far below its baseline (log): a cap
RISE = 3.0            # a fabric counter this many times its clean baseline (or from nothing)
STEP_INSIDE = 0.5     # ranks' own step times rising by this share of the slowdown: it is inside the steps
MOST = 0.5
READY_SAMPLES = 6     # clean samples a fabric counter's baseline needs


@dataclass(frozen=True)
class SlowdownResult:
    pace: np.ndarray         # per sample, the job's work rate (NaN where it does not run)
    baseline: np.ndarray     # per sample, the baseline it is judged against (NaN until ready)
    ratio: np.ndarray        # per sample, smoothed pace over baseline
    slowed: np.ndarray       # per sample, bool: in a slowdown (its whole run)
    confirmed: np.ndarray    # per sample, bool: where a slowdown was first reported (after PERSIST_S)
    causes: np.ndarray       # per sample, the evidence's cause ('' where not slowed)
    lost: np.ndarray         # per sample, GPU-seconds lost to the slowdown
    evidence: list[dict]     # per sample, what decided the cause
    learned: float | None    # the baseline at the last sample (what a later window starts from)


def job_pace(js: stall.JobSignals, clock: np.ndarray) -> np.ndarray:
    """The job's work rate per sample: the median over its ranks of compute activity times the SM clock
    ratio (activity alone where the clock is not exported)."""
    rate = js.work * np.where(np.isfinite(clock), clock, 1.0)
    return nan_reduce(np.nanmedian, rate, axis=1)


def detect(js: stall.JobSignals, sig: dict[str, np.ndarray], running: np.ndarray, period: float,
           prior: float | None = None) -> SlowdownResult:
    """``running``: samples the job runs with nothing else setting its pace; ``prior``: the baseline
    learned in an earlier window (``SlowdownResult.learned``), used until this window has its own."""
    n = len(js.times)
    pace = np.where(running, job_pace(js, sig["clock"]), np.nan)
    smooth = pd.Series(pace).rolling(max(1, round(SMOOTH_S / period)), min_periods=1).mean().to_numpy()
    span, ready = max(1, round(BASELINE_S / period)), max(1, round(READY_S / period))
    baseline, ratio = np.full(n, np.nan), np.full(n, np.nan)
    candidate = np.zeros(n, bool)
    clean: list[float] = []
    clean_at: list[int] = []
    known = prior
    devs: list[float] = []
    for i in range(n):
        while clean_at and clean_at[0] < i - span:
            clean_at.pop(0)
            clean.pop(0)
        if len(clean) >= ready:                 # a long slowdown keeps the baseline it started from
            known = float(np.median(clean))
        base = known
        if base and np.isfinite(smooth[i]) and running[i]:
            baseline[i], ratio[i] = base, smooth[i] / base
            bar = max(K * relative.robust_scale(np.asarray(devs)), FLOOR) if len(devs) >= ready else FLOOR
            candidate[i] = -np.log(max(ratio[i], 1e-9)) >= bar
        if running[i] and np.isfinite(pace[i]) and not candidate[i]:
            clean.append(float(pace[i]))
            clean_at.append(i)
            if np.isfinite(ratio[i]):
                devs.append(float(np.log(max(ratio[i], 1e-9))))
    slowed, confirmed = _runs(candidate, running, max(1, round(PERSIST_S / period)))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(1.0 - pace / baseline, 0.0, 1.0)
    lost = np.where(slowed, np.nan_to_num(share), 0.0) * js.busy.shape[1] * period
    lost[:1] = 0.0       # the first sample closes an interval before the data
    causes, evidence = _causes(js, sig, running, slowed, ratio, candidate)
    learned = known
    return SlowdownResult(pace, baseline, ratio, slowed, confirmed, causes, lost, evidence, learned)


def _runs(candidate: np.ndarray, running: np.ndarray, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate runs of at least ``samples`` running samples, whole (a sample that does not run, a
    stall or a straggler in between, neither breaks nor extends a run), and where each was confirmed."""
    idx = np.flatnonzero(running)
    slowed, confirmed = np.zeros_like(candidate), np.zeros_like(candidate)
    for a, b in _spans(candidate[idx]):
        if b - a >= samples:
            slowed[idx[a:b]] = True
            confirmed[idx[a + samples - 1]] = True
    return slowed, confirmed


def _causes(js: stall.JobSignals, sig: dict[str, np.ndarray], running: np.ndarray, slowed: np.ndarray,
            ratio: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    """Each slowdown's cause: per sample from its evidence, then the majority over the slowdown."""
    clean = running & ~candidate
    # a window the slowdown fills has no clean sample: its fabric counters have no baseline to rise from
    base = {name: _median(v, clean) if clean.sum() >= READY_SAMPLES else None for name, v in js.totals.items()}
    clock = nan_reduce(np.nanmedian, np.where(np.isfinite(sig["clock"]), sig["clock"], np.nan), axis=1)
    clock_base = _median(clock, clean)
    steps = sig.get("step")
    step = nan_reduce(np.nanmedian, steps, axis=1) if steps is not None and np.isfinite(steps).any() else None
    step_base = _median(step, clean) if step is not None else 0.0
    held = [m for name, m in sig.items() if name.startswith(REASON_PREFIX) and name[len(REASON_PREFIX):] != POWER_CAP_REASON]
    capped = np.nanmean(np.logical_or.reduce([np.nan_to_num(m) > 0 for m in held]), axis=1) if held else np.zeros(len(ratio))
    per = np.full(len(ratio), "", dtype=object)
    evidence: list[dict] = [{} for _ in ratio]
    for i in np.flatnonzero(slowed):
        t = {name: float(np.nan_to_num(v[i])) for name, v in js.totals.items()}
        ev = {"pace_ratio": round(float(ratio[i]), 3) if np.isfinite(ratio[i]) else None,
              "read_bytes_per_second": t["read"], "write_bytes_per_second": t["write"]}
        fabric = {**({"pause_seconds_per_second": round(t["pause"], 3)} if t["pause"] >= stall._PAUSE_MIN else {}),
                  **({} if base["xmit_wait"] is None else stall._rise("xmit_wait", t["xmit_wait"], base["xmit_wait"], RISE)),
                  **({} if base["cnp"] is None else stall._rise("cnp", t["cnp"], base["cnp"], RISE))}
        drop = float(np.log(clock_base / clock[i])) if clock_base and np.isfinite(clock[i]) and clock[i] > 0 else 0.0
        grew = float(np.log(step[i] / step_base)) if step is not None and step_base and np.isfinite(step[i]) else None
        if t["write"] >= max(stall._BURST * (base["write"] or 0.0), stall._BURST_MIN):
            per[i] = CHECKPOINT
        elif fabric or js.link_down[i]:
            per[i], ev = NETWORK, {**ev, **fabric, "link_down": bool(js.link_down[i])}
        elif drop >= CLOCK_DROP or capped[i] >= MOST:
            per[i], ev = POWER, {**ev, "clock_vs_baseline": round(float(np.exp(-drop)), 3),
                                 "gpus_with_hardware_reasons": round(float(capped[i]), 3)}
        elif (t["read"] >= stall._READ_MIN or t.get("io_wait", 0.0) >= stall.IO_WAIT_MIN) and \
                (grew is None or grew < STEP_INSIDE * -np.log(max(ratio[i], 1e-9))):
            per[i], ev = STORAGE, {**ev, **stall.input_wait(t.get("io_wait", 0.0))}
            if grew is not None:
                ev["step_vs_baseline"] = round(float(np.exp(grew)), 3)
        else:
            per[i] = UNKNOWN
        evidence[i] = ev
    out = np.full(len(ratio), "", dtype=object)
    for a, b in _spans(slowed):
        found = per[a:b][per[a:b] != ""]
        if len(found):
            names, counts = np.unique(found.astype(str), return_counts=True)
            out[a:b] = names[np.argmax(counts)]
    return out, evidence


def _median(values: np.ndarray | None, mask: np.ndarray) -> float:
    if values is None:
        return 0.0
    ok = values[mask & np.isfinite(values)]
    return float(np.median(ok)) if len(ok) else 0.0


def _spans(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def intervals(job_id: str, res: SlowdownResult, times: np.ndarray, start: float, period: float) -> list[dict]:
    """The report's rows: ``{job_id, start_s, end_s, first_detected_s, cause, pace_ratio, lost_gpu_seconds,
    evidence}`` per slowdown (one interrupted by a stall continues as one where its cause stays)."""
    out: list[dict] = []
    for a, b in _spans(res.slowed):
        cause = str(res.causes[a])
        lo, hi = float(times[a] - start - period), float(times[b - 1] - start)
        ratio = res.ratio[a:b][np.isfinite(res.ratio[a:b])]
        seen = np.flatnonzero(res.confirmed[a:b])
        row = {"job_id": job_id, "start_s": lo, "end_s": hi,
               "first_detected_s": float(times[a + seen[0]] - start) if len(seen) else hi, "cause": cause,
               "pace_ratio": round(float(np.median(ratio)), 3) if len(ratio) else None,
               "lost_gpu_seconds": round(float(res.lost[a:b].sum()), 1),
               "evidence": next((res.evidence[i] for i in range(a, b) if res.evidence[i]), {})}
        last = out[-1] if out else None
        if last and last["cause"] == cause and lo - last["end_s"] <= 2 * PERSIST_S:
            last["end_s"], last["lost_gpu_seconds"] = hi, round(last["lost_gpu_seconds"] + row["lost_gpu_seconds"], 1)
            continue
        out.append(row)
    return out
