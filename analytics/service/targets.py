"""Each checkpoint's target file system: the per-mount write rates of the job's nodes asked over the
checkpoint's span only (``lockstep.analytics.frame.inputs.WRITE_BY_MOUNT``), the mount that took the most
(``lockstep.analytics.scoring.checkpoints.target``). The service asks Prometheus for the checkpoints it has not
counted yet; the evaluation computes the same answers from a simulator frame."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.scoring.checkpoints import span
from lockstep.analytics.scoring.score import JobResult


def written(block: Block) -> dict[tuple[str, str], float]:
    """Per (mount, fstype), the answer's rates summed over its samples and nodes."""
    out: dict[tuple[str, str], float] = {}
    for k, labels in enumerate(block.labels):
        key = (labels.get("mount", ""), labels.get("fstype", ""))
        out[key] = out.get(key, 0.0) + float(np.nansum(block.values[block.series == k]))
    return out


def wanted(res: JobResult, after: float, step: float) -> list[tuple[int, Window]]:
    """The job's ended checkpoints that start at or after ``after``, each with the window its writes lie in."""
    return [(i, Window(*span(c, step), step)) for i, c in enumerate(res.checkpoints)
            if c["complete"] and c["start_timestamp"] >= after]


def placed(res: JobResult, found: dict[int, dict]) -> JobResult:
    """``res`` with each found target (``{mount, fstype, target_share}``) on its checkpoint."""
    if not found:
        return res
    return replace(res, checkpoints=tuple({**c, **found.get(i, {})} for i, c in enumerate(res.checkpoints)))


def nodes_of(res: JobResult) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(n) for n in res.columns.get_level_values("node")))
