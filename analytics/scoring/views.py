"""Which of a straggler's three views of pace agreed (pure, over a ``StragglerResult``): its step times
(``lockstep_rank_step_seconds``), its collectives' arrival (NCCL Inspector's execution time, inverted) and its
GPU counters (compute activity, SM clock, clock-event reasons).

Each view is judged over the samples the rank is flagged in: ``agree`` where it was clearly slower on at least
half of those it was known on, ``disagree`` where it was known and mostly not, ``absent`` where the job or the
node serves none of it. A rank the job's own pace shows slow while its GPU counters look like its peers' waits
for its host (the CPU, the data loader, the NIC), which no GPU counter sees: its cause is ``host``.
"""
from __future__ import annotations

import numpy as np

from lockstep.exporters.catalog.enums import ABSENT, AGREE, DISAGREE, HOST, PACE_VIEWS, TRANSIENT

# the straggler scorer's signals behind each view
VIEW_SIGNALS = {"step_time": ("step",), "collective": ("collective",), "gpu": ("work", "clock", "reason")}
MOST = 0.5
HOST_WHY = "its step times or collectives show it slow while its GPU counters look like its peers': its CPU, " \
           "data loader or NIC"


def judge(res, rows: np.ndarray, j: int) -> dict[str, str]:
    """``{view: agree|disagree|absent}`` for column ``j`` over ``rows`` (bool per sample)."""
    out = {}
    for view in PACE_VIEWS:
        names = VIEW_SIGNALS[view]
        known = np.logical_or.reduce([np.isfinite(res.drifts[n].level[rows, j]) for n in names if n in res.drifts])
        hit = np.logical_or.reduce([res.hits[n][rows, j] for n in names if n in res.hits])
        if not known.any():
            out[view] = ABSENT
        else:
            out[view] = AGREE if hit[known].mean() >= MOST else DISAGREE
    return out


def cause(found: str, views: dict[str, str]) -> str:
    """The cause once the views are known: a rank whose GPU counters disagree with its step times or its
    collectives, with no hardware evidence (``transient``), waits for its host."""
    pace = AGREE in (views["step_time"], views["collective"])
    return HOST if found == TRANSIENT and pace and views["gpu"] == DISAGREE else found
