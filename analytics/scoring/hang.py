"""Hang localisation: which ranks a hung job waits for, from NCCL's RAS (the node agents' nccl-ras collector).

A job stalled with no other cause (``hang``: no compute, no traffic, no I/O) waits inside a collective. Where
its node agents read NCCL's RAS, the answers say for whom:

- a rank RAS gets no answer from (its process unresponsive, or considered dead), named by its own node:
  ``rank_dead``;
- else ranks behind the furthest rank of one of their communicators within one RAS answer: the others entered
  a collective they did not, and wait for them in it: ``rank_stopped``.

Only answers taken after the stall began count: while a job runs its ranks are a few operations apart in any
answer (a rank between steps), and while it stands still for a checkpoint or in a collective every rank has
entered as many. The ranks named must be fewer than ``CULPRIT_SHARE`` of those RAS reports: a stall most ranks
are behind in is no rank's. Each sample reads only rows up to its own, so the service and the evaluation see a
culprit at the same time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lockstep.analytics.frame.features import MISSING_DEAD, Features
from lockstep.exporters.catalog.enums import HANG, RANK_DEAD, RANK_STOPPED

CULPRIT_SHARE = 0.5
MAX_NAMED = 16            # culprits listed in a sample's evidence (the most behind first)


@dataclass(frozen=True)
class Localised:
    causes: np.ndarray            # the stall causes, hangs localised to their ranks
    evidence: list[dict]          # a localised hang's evidence adds "culprits"
    culprits: np.ndarray          # times × GPUs: the GPU's rank is one the job waits for


def localise(features: Features, job_id: str, causes: np.ndarray, evidence: list[dict]) -> Localised:
    """``causes`` and ``evidence`` of the job's samples (``stall.classify``), each ``hang`` whose ranks RAS names
    turned into ``rank_dead`` or ``rank_stopped`` with its culprits."""
    cols = features.job_slice(job_id)
    n = cols.stop - cols.start
    flags = np.zeros((len(features.times), n), bool)
    sig = {name: features.signals[name][:, cols] for name in ("behind", "missing", "ras_age", "collectives")
           if name in features.signals}
    if "ras_age" not in sig or not n:
        return Localised(causes, evidence, flags)
    causes, evidence = causes.copy(), list(evidence)
    absent = np.full((len(features.times), n), np.nan)
    behind, missing = sig.get("behind", absent), sig.get("missing", absent)
    taken = features.times[:, None] - sig["ras_age"]          # when each GPU's answer was taken
    stalled_from = _stall_starts(features.times, causes)
    for i in np.flatnonzero(causes == HANG):
        fresh = taken[i] >= stalled_from[i]
        reported = np.isfinite(behind[i]) | np.isfinite(missing[i])
        dead = fresh & (np.nan_to_num(missing[i]) > 0)
        stopped = fresh & (np.nan_to_num(behind[i]) >= 1) & ~dead
        for cause, named in ((RANK_DEAD, dead), (RANK_STOPPED, stopped)):
            if named.any() and named.sum() < CULPRIT_SHARE * reported.sum():
                flags[i] = named
                causes[i] = cause
                evidence[i] = {**evidence[i], "culprits": _culprits(features, cols, sig, i, named)}
                break
    return Localised(causes, evidence, flags)


def _stall_starts(times: np.ndarray, causes: np.ndarray) -> np.ndarray:
    """Per sample, the time of the first sample of the run of stalled samples it is in (its interval's end: the
    job stood still by then)."""
    out = np.full(len(times), np.inf)
    start = np.inf
    for i, cause in enumerate(causes):
        start = (start if i and causes[i - 1] else times[i]) if cause else np.inf
        out[i] = start
    return out


def _culprits(features: Features, cols: slice, sig: dict[str, np.ndarray], i: int, named: np.ndarray) -> list[dict]:
    """The named ranks, the most behind first: node, GPU, rank, what RAS says of each (missing, or how many
    collectives behind), and ``last_collective``: when the answer that first showed its last count was taken
    (its last collective was entered by then, after the answer before)."""
    moving = np.nan_to_num(sig["collectives"][: i + 1]) > 0 if "collectives" in sig else None
    taken = features.times[: i + 1, None] - sig["ras_age"][: i + 1]
    out = []
    for j in np.flatnonzero(named):
        _, node, gpu = features.columns[cols.start + j]
        row = {"node": str(node), "gpu": str(gpu),
               "rank": features.ranks[cols.start + j] if features.ranks else ""}
        missing = sig.get("missing")
        if missing is not None and np.isfinite(missing[i, j]):
            row["ras"] = "dead" if missing[i, j] >= MISSING_DEAD else "unresponsive"
        else:
            row["ras"] = "behind"
            row["collectives_behind"] = int(sig["behind"][i, j])
        moved = np.flatnonzero(moving[:, j]) if moving is not None else ()
        row["last_collective"] = float(taken[moved[-1], j]) if len(moved) and np.isfinite(taken[moved[-1], j]) else None
        out.append(row)
    out.sort(key=lambda r: (r["ras"] == "behind", -r.get("collectives_behind", 0), r["node"], r["gpu"]))
    return out[:MAX_NAMED]


def findings(features: Features, job_id: str, localised: Localised, start: float) -> list[dict]:
    """Each rank named in the window, once (the evaluation report's ``hangs`` rows): the cause, node, GPU and
    rank, and when it was first and last named (seconds from ``start``; a sample at ``t`` says so at ``t``)."""
    cols = features.job_slice(job_id)
    out = []
    for j in np.flatnonzero(localised.culprits.any(axis=0)):
        at = np.flatnonzero(localised.culprits[:, j])
        _, node, gpu = features.columns[cols.start + j]
        out.append({"job_id": job_id, "node": str(node), "gpu": str(gpu),
                    "rank": features.ranks[cols.start + j] if features.ranks else "",
                    "cause": str(localised.causes[at[0]]), "first_named_s": float(features.times[at[0]] - start),
                    "last_named_s": float(features.times[at[-1]] - start)})
    return sorted(out, key=lambda f: (f["first_named_s"], f["node"], int(f["gpu"]) if f["gpu"].isdigit() else 0))
