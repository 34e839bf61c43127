"""Each checkpoint of a job as a fact: when it started, how long it wrote, how many bytes at what
bandwidth (pure, over ``lockstep.analytics.scoring.stall.JobSignals``).

A checkpoint is a write burst (the job's write rate ``stall._BURST`` times its usual level and at least
``stall._BURST_MIN``, the stall classifier's own test) aligned with an activity drop: some sample of the
burst is a checkpoint stall or slowdown, or the job's progress fell below ``stall.PARTIAL_FRACTION`` of
its baseline (the ranks wait while the state is written). A burst with no such drop (another job on the
node, an asynchronous copy) is not the job's checkpoint.

Its size is the bytes written above the job's usual rate (beside the burst: ``NEAR`` samples either side, so
that windows holding the same checkpoint measure it alike) over the burst's samples (a counter's increase
per sample: nothing is lost at the edges, where a sample holds part of the write). Its bandwidth is the
rate of the samples the write fills (those within ``FULL`` of the burst's peak, their median), and its
duration the size over that bandwidth: a write that fills part of its first and last samples is counted
by the part, not by whole samples. It started that part of its first sample before the sample's end. Its target is the file system
the job's nodes wrote the most bytes to over its span (``target``, from per-mount write rates asked for that
span only).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from lockstep.analytics.scoring import stall
from lockstep.exporters.catalog.enums import CHECKPOINT

FULL = 0.8     # a sample whose rate is within this share of the burst's peak: the write filled it
NEAR = 6       # samples either side of a burst whose writes are the job's usual level beside it


def _spans(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def detect(job_id: str, js: stall.JobSignals, causes: np.ndarray, slow_causes: np.ndarray | None,
           start: float, period: float) -> list[dict]:
    """``{job_id, start_s, end_s, duration_s, bytes, bandwidth_bytes_per_second, start_timestamp, complete}`` per
    checkpoint, in order (``start_timestamp``: its start in Unix seconds; ``complete``: it ended within the
    window, before its last sample, so its size is known); ``causes``: the stall cause per sample,
    ``slow_causes``: the job-wide slowdown's (or None)."""
    write = np.nan_to_num(js.totals["write"])
    burst = write >= stall._BURST_MIN
    usual = float(np.median(write[~burst])) if (~burst).any() else 0.0
    burst &= write >= stall._BURST * usual
    dropped = np.nan_to_num(js.progress, nan=0.0) < stall.PARTIAL_FRACTION * js.baseline if js.baseline else \
        np.zeros(len(write), bool)
    marked = causes == CHECKPOINT
    if slow_causes is not None:
        marked |= slow_causes == CHECKPOINT
    out = []
    for a, b in _spans(burst):
        if not (marked[a:b] | dropped[a:b]).any():
            continue
        near = np.r_[write[max(a - NEAR, 0):a][~burst[max(a - NEAR, 0):a]], write[b:b + NEAR][~burst[b:b + NEAR]]]
        level = float(np.median(near)) if len(near) else usual     # the job's usual writes beside the burst
        rate = np.clip(write[a:b] - level, 0.0, None)
        size = float(rate.sum() * period)
        bandwidth = float(np.median(rate[rate >= FULL * rate.max()]))
        if bandwidth <= 0:
            continue
        lead = min(float(rate[0]) / bandwidth, 1.0) * period       # the part of its first sample the write filled
        begin = float(js.times[a]) - start - lead
        duration = size / bandwidth
        out.append({"job_id": job_id, "start_s": round(begin, 3), "end_s": round(begin + duration, 3),
                    "duration_s": round(duration, 3), "bytes": round(size), "bandwidth_bytes_per_second": round(bandwidth),
                    "start_timestamp": round(begin + start, 3), "complete": bool(b < len(write))})
    return out


def span(c: dict, step: float) -> tuple[float, float]:
    """The Unix seconds whose samples hold the checkpoint's writes, on a grid of ``step``: from the sample
    ending at or after its start to the one after its end."""
    lo = np.ceil(c["start_timestamp"] / step) * step
    return float(lo), float(np.ceil((c["start_timestamp"] + c["duration_s"]) / step) * step + step)


def target(written: Mapping[tuple[str, str], float]) -> dict:
    """``{mount, fstype, target_share}``: the (mount, fstype) the checkpoint's span wrote the most bytes to,
    and its share of them (``written``: bytes, or rates summed over the span, per mount); empty without any."""
    total = sum(v for v in written.values() if v > 0)
    if not total:
        return {}
    (mount, fstype), most = max(written.items(), key=lambda kv: kv[1])
    return {"mount": mount, "fstype": fstype, "target_share": round(most / total, 3)}
