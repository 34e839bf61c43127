"""Stall detection and cause classification per job, over the matrices of ``lockstep.analytics.frame.features``.

A job is stalled while its progress (median SM/tensor activity over its GPUs) is below
``STALL_FRACTION`` of its own baseline. Each stalled sample gets one cause, decided in this order
and recorded with the evidence that decided it:
member lost (some of the job's GPUs left the mapping, for two samples in a row, while the rest
stand still) → checkpoint (write
burst) → network (pause/xmit-wait/CNP rising or a rail down) → straggler (a few ranks busy while the
median idles) → storage (reads still trickling, nothing else) → hang. A sample where none of the job's
GPUs is mapped (the job ended, or no data) is no stall, nor is one where the job's GPUs sit idle with
their clocks parked and nothing else explains it (``idle``: the job's processes are gone, restarting
or not started, while it holds its GPUs; a hung job keeps its kernels resident and its clocks up). Storage
(input) is also what the job's I/O pressure shows where the job-io collector reads it: its cgroup stalled on
I/O for ``IO_WAIT_MIN`` of the time or more, reads counted or not (a loader reading over NFS or from an object
store that no node counter sees).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.exporters.catalog.enums import CHECKPOINT, HANG, MEMBER_LOST, NETWORK, STALL_CAUSES, STORAGE, STRAGGLER

STALL_FRACTION = 0.5
PARTIAL_FRACTION = 0.9
MEMBER_GONE_SAMPLES = 2   # samples in a row a member must be missing from the mapping to be lost
BLOCKING = (CHECKPOINT, NETWORK)   # causes that block the whole job for part of a sample
CAUSES = STALL_CAUSES
_BURST = 5.0          # a write burst: job write rate this many times its productive baseline...
_BURST_MIN = 1.0e8    # ...and at least this many bytes per second
_PAUSE_MIN = 0.01     # seconds paused per second, summed over the job's NICs
_READ_MIN = 1.0e6     # bytes/s: below this the job reads nothing
IO_WAIT_MIN = 0.05    # share of time the job's cgroup stalls on I/O (PSI full) that is an input stall
PARKED_CLOCK = 0.35   # SM clock over its max below which an idle GPU has parked it (H100: 345 of 1980 MHz)
IDLE_WORK = 0.02      # compute activity below which a GPU does nothing
IDLE_SHARE = 0.9      # this share of the job's mapped GPUs idle: the job is idle


@dataclass(frozen=True)
class JobSignals:
    """Job-level series (one value per sample) derived from the per-GPU matrices."""

    times: np.ndarray
    busy: np.ndarray        # times × GPUs activity (mean of SM and tensor active)
    work: np.ndarray        # times × GPUs compute activity (tensor active, else SM active)
    progress: np.ndarray    # median compute activity over the job's GPUs
    baseline: float         # the job's productive activity level
    totals: dict[str, np.ndarray]   # job-wide sums: read, write, pause, cnp, xmit_wait, tx; io_wait: mean share
    link_down: np.ndarray   # any rail of the job reports a down/flapping link
    present: np.ndarray | None = None   # times × GPUs: the GPU is mapped to the job at that sample
    members: tuple[tuple[str, str, str], ...] = ()   # (node, gpu, pod) of each column
    parked: np.ndarray | None = None    # per sample, share of the job's GPUs idle with their clocks parked


def job_signals(features: Features, job_id: str) -> JobSignals:
    cols = features.job_slice(job_id)
    sig = {name: m[:, cols] for name, m in features.signals.items()}
    busy = nan_reduce(np.nanmean, np.stack([sig["sm"], sig["tensor"]]), axis=0)
    # Tensor activity only counts compute (SM activity also counts NCCL kernels spinning in a wait),
    # so it measures progress best; SM activity stands in where no tensor metric is exported.
    work = sig["tensor"] if np.isfinite(sig["tensor"]).any() else sig["sm"]
    progress = nan_reduce(np.nanmedian, work, axis=1)
    baseline = float(nan_reduce(np.nanquantile, progress, 0.9)) if np.isfinite(progress).any() else np.nan
    nodes = features.columns[cols].get_level_values("node")
    first_of_node = ~pd.Index(nodes).duplicated()      # node-wide signals are repeated per GPU
    totals = {name: np.nansum(sig[name][:, first_of_node], axis=1) for name in ("read", "write", "pause", "cnp")}
    for name in ("tx", "xmit_wait"):
        totals[name] = np.nansum(sig[name], axis=1)
    io_wait = sig.get("io_wait")      # a share of time per node: the job's mean over its nodes (NaN: not read)
    totals["io_wait"] = nan_reduce(np.nanmean, io_wait[:, first_of_node], axis=1) if io_wait is not None \
        else np.full(len(busy), np.nan)
    link = sig.get("link")
    link_down = (np.nan_to_num(link) > 0).any(axis=1) if link is not None else np.zeros(len(busy), bool)
    # No mapping sample at all (a hand-built frame): membership unknown, every sample counts.
    present = sig["member"] > 0 if "member" in sig and np.nan_to_num(sig["member"]).any() else None
    pods = features.pods[cols] if features.pods else ("",) * busy.shape[1]
    members = tuple((str(node), str(g), pod) for (_, node, g), pod in zip(features.columns[cols], pods))
    with np.errstate(invalid="ignore"):
        parked = np.where(np.isfinite(sig["clock"]), (sig["clock"] < PARKED_CLOCK) & (np.nan_to_num(busy) < IDLE_WORK), np.nan)
    return JobSignals(features.times, busy, work, progress, baseline, totals, link_down, present, members,
                      nan_reduce(np.nanmean, parked, axis=1))


def idle_mask(js: JobSignals) -> np.ndarray:
    """Samples where the job holds its GPUs and runs nothing on them (``IDLE_SHARE`` of them idle,
    their clocks parked)."""
    if js.parked is None:
        return np.zeros(len(js.times), bool)
    return np.nan_to_num(js.parked) >= IDLE_SHARE


def stalled_mask(js: JobSignals) -> np.ndarray:
    stalled = np.nan_to_num(js.progress, nan=0.0) < STALL_FRACTION * js.baseline
    return stalled & js.present.any(axis=1) if js.present is not None else stalled


def missing_members(js: JobSignals, i: int) -> list[dict]:
    """Members of the job gone from the mapping at sample ``i`` while others are still in it: a node's
    GPUs (the pod's, under Kubernetes) all mapped to the job earlier in the window and none for the
    last ``MEMBER_GONE_SAMPLES`` samples (one missed scrape of a node agent is no lost member).
    A single GPU leaving (fallen off the bus) is a GPU fault, not a lost member. ``{node, pod, gpus}``."""
    lo = i - MEMBER_GONE_SAMPLES + 1
    if js.present is None or lo < 1 or not js.present[i].any():
        return []
    groups: dict[tuple[str, str], list[int]] = {}
    for c, (node, _, pod) in enumerate(js.members):
        groups.setdefault((node, pod), []).append(c)
    seen, gone = js.present[:lo].any(axis=0), ~js.present[lo: i + 1].any(axis=0)
    return [{"node": node, "pod": pod, "gpus": [js.members[c][1] for c in cols]}
            for (node, pod), cols in groups.items() if seen[cols].any() and gone[cols].all()]


def _baseline(values: np.ndarray, productive: np.ndarray) -> float:
    ok = values[productive & np.isfinite(values)]
    return float(np.median(ok)) if len(ok) else 0.0


def classify(js: JobSignals) -> tuple[np.ndarray, list[dict]]:
    """The cause of each sample ('' when not stalled) and the evidence behind it.

    A sample is stalled when progress is below ``STALL_FRACTION`` of the baseline, or, for a cause
    that blocks the whole job for part of the sample (a checkpoint write, a rail going down, a pause
    storm beginning or ending), when progress dipped below ``PARTIAL_FRACTION`` with that cause's
    evidence present (``_blocks``).
    """
    full = stalled_mask(js)
    partial = ~full & (np.nan_to_num(js.progress) < PARTIAL_FRACTION * js.baseline)
    base = {name: _baseline(v, ~full) for name, v in js.totals.items()}
    causes = np.full(len(js.times), "", dtype=object)
    evidence: list[dict] = [{} for _ in js.times]
    busy_max = nan_reduce(np.nanmax, js.work, axis=1) if js.work.shape[1] else np.zeros(len(js.times))
    idle = idle_mask(js)
    found: dict[int, tuple[str, dict]] = {}
    for i in np.flatnonzero(full | partial):
        cause, ev = _cause(js, base, i, float(np.nan_to_num(busy_max[i])))
        if full[i] and (missing := missing_members(js, i)):
            cause, ev = MEMBER_LOST, {**ev, "missing": missing}
        if cause == HANG and idle[i]:         # nothing runs and nothing explains it: idle, not hung
            continue
        found[int(i)] = (cause, ev)
    for i, (cause, ev) in found.items():
        if full[i] or cause in BLOCKING and _blocks(js, full, found, cause, i):
            causes[i], evidence[i] = cause, ev
    return causes, evidence


def _blocks(js: JobSignals, full: np.ndarray, found: dict[int, tuple[str, dict]], cause: str, i: int) -> bool:
    """A partial sample of a blocking cause is a stall's part: a checkpoint's write, a rail down, or the
    fabric's congestion at the edge of a full network stall (a pause storm starting or ending within
    the sample). Congestion that only slows the job, with no such stall beside it, is a job-wide
    slowdown (``lockstep.analytics.scoring.slowdown``)."""
    if cause == CHECKPOINT or js.link_down[i]:
        return True
    return any(0 <= k < len(full) and full[k] and found.get(k, ("",))[0] == cause for k in (i - 1, i + 1))


def stalled_seconds(js: JobSignals, causes: np.ndarray, period: float) -> np.ndarray:
    """Seconds of each sample the job stood still: all of it when fully stalled, else the lost share."""
    lost = np.clip(1.0 - np.nan_to_num(js.progress) / js.baseline, 0.0, 1.0) if js.baseline else np.zeros(len(causes))
    return np.where(stalled_mask(js), period, np.where(causes != "", lost * period, 0.0))


def _cause(js: JobSignals, base: dict[str, float], i: int, busy_max: float) -> tuple[str, dict]:
    t = {name: float(np.nan_to_num(v[i])) for name, v in js.totals.items()}
    progress = float(np.nan_to_num(js.progress[i]))
    write_burst = t["write"] >= max(_BURST * base["write"], _BURST_MIN)
    congestion = {**({"pause_seconds_per_second": round(t["pause"], 3)} if t["pause"] >= _PAUSE_MIN else {}),
                  **_rise("xmit_wait", t["xmit_wait"], base["xmit_wait"]), **_rise("cnp", t["cnp"], base["cnp"])}
    ev = {"progress_ratio": round(progress / js.baseline, 3) if js.baseline else None,
          "write_bytes_per_second": t["write"], "read_bytes_per_second": t["read"],
          "tx_ratio": round(t["tx"] / base["tx"], 3) if base["tx"] else None}
    if write_burst:
        return CHECKPOINT, ev
    if congestion or js.link_down[i]:
        return NETWORK, {**ev, **congestion, "link_down": bool(js.link_down[i])}
    if busy_max >= STALL_FRACTION * js.baseline and busy_max >= 2.0 * progress:
        return STRAGGLER, {**ev, "busiest_rank_ratio": round(busy_max / js.baseline, 3)}
    if t["read"] >= _READ_MIN or t.get("io_wait", 0.0) >= IO_WAIT_MIN:
        return STORAGE, {**ev, **input_wait(t.get("io_wait", 0.0))}
    return HANG, ev


def input_wait(share: float) -> dict:
    """Evidence of an input stall from the job's I/O pressure: the share of time its cgroup stalled on I/O,
    where the job-io collector reads it and it reaches ``IO_WAIT_MIN``; empty otherwise."""
    return {"io_wait_share": round(share, 3)} if share >= IO_WAIT_MIN else {}


def _rise(name: str, value: float, baseline: float, factor: float = 3.0) -> dict:
    """Evidence that a counter rate rose ``factor``-fold over its productive baseline (or appeared
    from nothing); empty when it did not. Plain numbers only: the evidence is served as JSON."""
    if value <= 0 or (baseline > 0 and value < factor * baseline):
        return {}
    return {f"{name}_per_second": round(value, 3),
            f"{name}_vs_baseline": round(value / baseline, 2) if baseline > 0 else None}


def stall_intervals(job_id: str, js: JobSignals, causes: np.ndarray, evidence: list[dict],
                    start: float, period: float) -> list[dict]:
    """Consecutive samples with the same cause → ``{job_id, start_s, end_s, cause, evidence}``.

    A sample at ``t`` describes the interval (t - period, t] (gauges average it, counters grew in it).
    """
    out: list[dict] = []
    for i, cause in enumerate(causes):
        if not cause:
            continue
        t = float(js.times[i]) - start
        last = out[-1] if out else None
        if last and last["cause"] == cause and abs(last["end_s"] - (t - period)) < 1e-6:
            last["end_s"] = t
            continue
        out.append({"job_id": job_id, "start_s": t - period, "end_s": t, "cause": cause, "evidence": evidence[i]})
    return out
