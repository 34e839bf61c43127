"""One scoring pass over a long series frame: straggler, stall and loss results for every job.

The service, the evaluation harness and the monthly report all call ``score_frame``; only where
the frame comes from differs (analytics.source_prom, or the simulator's series).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring import cause, checkpoints, hang, imbalance, ledger, loss, slowdown, stall, straggler
from lockstep.analytics.scoring.detections import detections, gpu_cause, node_cause
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.exporters.catalog.enums import UNKNOWN, WORK


@dataclass(frozen=True)
class JobResult:
    job_id: str
    columns: pd.MultiIndex                  # (job_id, node, gpu) of the job's GPUs
    times: np.ndarray
    stragglers: straggler.StragglerResult
    causes: np.ndarray                      # stall cause per sample ('' when not stalled)
    stalled_s: np.ndarray                   # seconds of each sample the job stood still
    evidence: list[dict]
    lost: dict[str, np.ndarray]             # GPU-seconds lost per sample, by cause
    detections: list[dict]                  # first flag per GPU/node (evaluation report rows)
    stalls: list[dict]                      # stall intervals with cause and evidence
    loss: dict                              # loss account (evaluation report shape)
    baseline: float | None                  # productive level learned from clean samples, if any
    imbalance: dict                         # job-level finding (evaluation report ``imbalance`` row)
    imbalance_lost: np.ndarray              # GPU-seconds lost to the imbalance per sample
    learned: pd.DataFrame                   # each GPU's usual level per pace signal (index: node, gpu)
    slowdown: slowdown.SlowdownResult | None = None   # job-wide slowdowns per sample
    slowdowns: tuple[dict, ...] = ()        # slowdown intervals with cause and evidence (report rows)
    idle: np.ndarray | None = None          # per sample: the job holds its GPUs and runs nothing
    ledger: dict | None = None              # GPU-seconds per sample by kind and cause (lockstep.analytics.scoring.ledger)
    ledger_account: dict | None = None      # its totals (evaluation report ``ledger``)
    culprits: np.ndarray | None = None      # times × GPUs: a rank the hung job waits for (scoring/hang.py)
    hangs: tuple[dict, ...] = ()            # each rank named, once (evaluation report ``hangs`` rows)
    checkpoints: tuple[dict, ...] = ()      # each checkpoint measured (scoring/checkpoints.py; report ``checkpoints``)


def infer_period(times: np.ndarray) -> float:
    steps = np.diff(times)
    return float(np.median(steps)) if len(steps) else 1.0


MIN_CLEAN = 6        # samples with neither a stall nor a straggler needed to learn the baseline


def clean_baseline(js: stall.JobSignals, causes: np.ndarray, res: straggler.StragglerResult,
                   slowed: np.ndarray | None = None) -> float | None:
    """The job's productive level over samples where nothing held it back (nor ``slowed`` it), if there
    are enough.

    The first pass takes a high quantile over the whole window, which is the *slowed* level when a
    straggler lasts most of the window; the loss account needs the unimpeded one."""
    holding = res.holding.any(axis=1)
    for flags in res.node_holding.values():
        holding |= flags
    clean = (causes == "") & ~holding & np.isfinite(js.progress)
    if slowed is not None:
        clean &= ~slowed
    if clean.sum() < MIN_CLEAN:
        return None
    return float(np.mean(js.progress[clean]))    # clean samples: the expected level, jitter and all


def _passes(features: Features, job_id: str, period: float, baseline: float | None, prior: dict | None):
    js = stall.job_signals(features, job_id)
    if baseline is not None:
        js = replace(js, baseline=baseline)
    causes, evidence = stall.classify(js)
    res = straggler.score(features, job_id, js, causes, period, prior)
    learned = clean_baseline(js, causes, res)
    if baseline is None and learned is not None and abs(learned - js.baseline) > 0.02 * js.baseline:
        return _passes(features, job_id, period, learned, prior)
    return js, causes, evidence, res, learned


def peer_progress(js: stall.JobSignals, res: straggler.StragglerResult, nodes: np.ndarray) -> np.ndarray:
    """The job's progress read on the GPUs that wait: the median over those not holding the job back
    (the slow ones compute longer, and with a node of them the median of all sits a little high)."""
    holding = res.holding.copy()
    for node, flags in res.node_holding.items():
        holding[:, nodes == node] |= flags[:, None]
    peers = np.where(holding, np.nan, js.work)
    return np.where(holding.all(axis=1), js.progress, nan_reduce(np.nanmedian, peers, axis=1))


def _prior(columns: pd.MultiIndex, learned: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """Usual levels remembered from an earlier window, aligned to this window's GPUs (NaN: new GPU)."""
    if learned is None or learned.empty:
        return None
    keys = pd.MultiIndex.from_arrays([columns.get_level_values("node"), columns.get_level_values("gpu")])
    aligned = learned.reindex(keys)
    return {name: aligned[name].to_numpy(dtype=float) for name in learned.columns}


def job_imbalance(job_id: str, columns: pd.MultiIndex, res: straggler.StragglerResult, period: float,
                  running: np.ndarray, steps: np.ndarray, works: np.ndarray
                  ) -> tuple[dict, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The finding, the GPU-seconds it costs per sample and its share of the job's running time, by
    cause (the GPUs slow since they started whose hardware explains it are stragglers, not imbalance:
    ``since_start_cost``), counted while ``running`` (a stall or a straggler sets the pace otherwise).
    The ranks and their ratios come from compute activity (in lockstep training every rank's activity is
    its compute time over the one shared step time: the purest measure of its pace); the waiting they
    cost from the ranks' own step times where the job exports them (the all-reduce takes everyone the
    same time), else from activity."""
    usual = res.drifts["work"].learned
    cost = "step" if np.isfinite(res.drifts["step"].learned).any() else "work"
    paces = res.drifts[cost].learned
    hardware = res.since_start.any(axis=0)
    hit = imbalance.involved(usual) & ~hardware
    share = imbalance.lost_share(paces, hit)
    level = imbalance.centred(usual)
    judged = [cause.judge(res.hardware, running, j, float(level[j]), WORK) if hit[j] else (None, {})
              for j in range(len(columns))]
    work_only = hit & np.array([c == WORK for c, _ in judged])
    share_work = imbalance.lost_share(paces, work_only)
    gpu_s = len(columns) * period
    first = np.arange(len(running)) > 0        # the first sample closes an interval before the data
    per_sample = {WORK: np.where(running & first, share_work * gpu_s, 0.0),
                  UNKNOWN: np.where(running & first, (share - share_work) * gpu_s, 0.0)}
    ranks = [{"node": node, "gpu": gpu} for _, node, gpu in columns]
    lost = float(sum(v.sum() for v in per_sample.values()))
    found = imbalance.finding(ranks, usual, "compute_activity", lost, "lost_gpu_seconds", hit)
    for row in found["ranks"]:
        j = next(k for k, r in enumerate(ranks) if r == {"node": row["node"], "gpu": row["gpu"]})
        row["cause"], row["evidence"] = judged[j][0], judged[j][1]
    overall = cause.combined([r["cause"] for r in found["ranks"]], WORK)
    # the GPUs slow since they started whose hardware explains it taken at the median: their cost is theirs
    x = (steps if cost == "step" else works) / np.where(hardware, np.exp(np.nan_to_num(imbalance.centred(paces))), 1.0)
    compute = imbalance.compute_share(usual, paces, hit) if cost == "step" else 1.0
    ratio = np.exp(np.nan_to_num(level))          # compute activity's: the ranks' compute against the median's
    waits = {c: imbalance.extra_waiting(x, np.where(mask, ratio, 1.0), compute)
             for c, mask in ((WORK, work_only), (UNKNOWN, hit))}
    return ({"job_id": job_id, **found, "lost_share": round(share, 4),
             "cost_basis": {"step": "step_seconds", "work": "compute_activity"}[cost], "cause": overall}, per_sample,
            {WORK: waits[WORK], UNKNOWN: np.clip(waits[UNKNOWN] - waits[WORK], 0.0, None)})


def since_start_cost(res: straggler.StragglerResult, js: stall.JobSignals, steps: np.ndarray, hardware: np.ndarray,
                     running: np.ndarray, period: float) -> dict[str, np.ndarray]:
    """GPU-seconds per sample that the GPUs slow since they started (hardware) cost: each step waits for
    its slowest rank, so the job loses what its slowest rank's time would shrink by with those GPUs at
    their peers' usual pace (their time divided by their usual ratio to the median), measured sample
    by sample so the other ranks' jitter is counted as it falls. Read on the ranks' own step times where
    the job exports them; else on compute activity, as if the whole step were compute (an upper bound).
    ``throttle`` is their own extra time where their clock is held back (a hardware reason, or a clock
    below their peers', on most samples), ``straggler`` the rest."""
    n = len(hardware)
    zero = np.zeros(len(running))
    if not hardware.any():
        return {"straggler": zero, "throttle": zero}
    x = steps if np.isfinite(steps).any() else js.work
    usual = res.usual[-1] - np.nanmedian(res.usual[-1]) if len(res.usual) else np.zeros(n)
    ratio = np.where(hardware, np.exp(np.clip(np.nan_to_num(usual), 0.0, None)), 1.0)
    without = x / ratio
    slowest, fixed = nan_reduce(np.nanmax, x, axis=1), nan_reduce(np.nanmax, without, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.clip(np.nan_to_num(1.0 - fixed / slowest), 0.0, 1.0)
        own = np.clip(np.nan_to_num((x - without) / slowest[:, None]), 0.0, None)
    hw = res.hardware
    with np.errstate(invalid="ignore"):
        held_back = (hw.held | (hw.clock_gap >= hw.clock_bar))[running].mean(axis=0) >= 0.5 if running.any() \
            else np.zeros(n, bool)
    counted = running & (np.arange(len(running)) > 0)     # the first sample closes an interval before the data
    total = np.where(counted, share * n * period, 0.0)
    throttle = np.minimum(np.where(counted, own[:, hardware & held_back].sum(axis=1) * period, 0.0), total)
    return {"straggler": total - throttle, "throttle": throttle}


def running_unheld(causes: np.ndarray, res: straggler.StragglerResult) -> np.ndarray:
    """Samples where the job runs and no straggler that became slower holds it back."""
    holding = res.holding.any(axis=1)
    for flags in res.node_holding.values():
        holding |= flags
    return (causes == "") & ~holding


def score_job(features: Features, job_id: str, start: float, period: float,
              baseline: float | None = None, learned: pd.DataFrame | None = None,
              pace: float | None = None) -> JobResult:
    """``baseline``: the job's productive level learned earlier (the service keeps it between
    refreshes), used when this window has no clean stretch to learn it from; ``learned``: each
    GPU's usual pace among its peers from an earlier window (``JobResult.learned``), so a slowdown
    that began before this window is still one; ``pace``: the job's work rate learned earlier
    (``JobResult.slowdown.learned``), the baseline of a job-wide slowdown that fills this window."""
    cols = features.job_slice(job_id)
    prior = _prior(features.columns[cols], learned)
    js, causes, evidence, res, level = _passes(features, job_id, period, None, prior)
    if level is None and baseline is not None:
        js, causes, evidence, res, level = _passes(features, job_id, period, baseline, prior)
    hung = hang.localise(features, job_id, causes, evidence)      # a hang's ranks, where NCCL's RAS names them
    causes, evidence = hung.causes, hung.evidence
    idle = stall.idle_mask(js)
    running = running_unheld(causes, res) & ~idle
    sig = {name: m[:, cols] for name, m in features.signals.items()}
    slow = slowdown.detect(js, sig, running, period, pace)
    if slow.slowed.any():      # the productive level is the job's own when nothing slows it
        level = clean_baseline(js, causes, res, slow.slowed) or level
    # The throttled GPUs' own extra compute is the `throttle` loss: a clock that fell or a throttling
    # reason the GPU took on (a reason most of the job holds all along, like sw_power_cap, is not one).
    throttled = res.hits["clock"] | res.hits["reason"]
    # The loss account measures against the clean level learned (the first pass's high quantile sits
    # above a jittering job's typical level; the stall classes do not hinge on that difference).
    nodes = np.asarray(features.columns[cols].get_level_values("node"))
    js = replace(js, baseline=level if level is not None else js.baseline, progress=peer_progress(js, res, nodes))
    lost = loss.lost_by_cause(js, causes, res, throttled, period)
    found, imbalance_by_cause, imbalance_share = job_imbalance(job_id, features.columns[cols], res, period,
                                                               running & ~slow.slowed, sig["step"], js.work)
    since_start_lost = since_start_cost(res, js, sig["step"], res.since_start.any(axis=0), running, period)
    holders, holder_causes = straggler_holders(res, nodes)
    book = ledger.per_sample(len(nodes), period, causes, lost, holders, holder_causes, since_start_lost,
                             imbalance_share, slow, idle)
    account = loss.account(job_id, js, loss.with_slowdowns(loss.added(lost, since_start_lost), slow), period)
    imbalance_lost = sum(imbalance_by_cause.values())
    keys = pd.MultiIndex.from_arrays([features.columns[cols].get_level_values(n) for n in ("node", "gpu")])
    usual = pd.DataFrame({name: d.learned for name, d in res.drifts.items()}, index=keys)
    return JobResult(
        job_id=job_id, columns=features.columns[cols], times=features.times, stragglers=res,
        causes=causes, stalled_s=stall.stalled_seconds(js, causes, period), evidence=evidence,
        lost=loss.with_slowdowns(loss.added(lost, since_start_lost), slow),
        detections=detections(features, job_id, res, start),
        stalls=stall.stall_intervals(job_id, js, causes, evidence, start, period),
        loss=account, baseline=level, imbalance=found,
        imbalance_lost=imbalance_lost, learned=usual, slowdown=slow,
        slowdowns=tuple(slowdown.intervals(job_id, slow, features.times, start, period)), idle=idle,
        ledger=book, ledger_account=ledger.account(job_id, book, account["allocated_gpu_seconds"]),
        culprits=hung.culprits, hangs=tuple(hang.findings(features, job_id, hung, start)),
        checkpoints=tuple(checkpoints.detect(job_id, js, causes, slow.causes, start, period)))


def straggler_holders(res: straggler.StragglerResult, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """times × GPUs holding the job back (a node's GPUs while the node does), and each GPU's straggler
    cause (its node's where the node is flagged; '' for the others)."""
    holders = res.holding.copy()
    out = np.full(len(nodes), "", dtype=object)
    for j in np.flatnonzero(res.flagged.any(axis=0)):
        out[j] = gpu_cause(res, j)[0]
    for node, flags in res.node_holding.items():
        mask = nodes == node
        holders[:, mask] |= flags[:, None]
        if res.node_flagged[node].any():
            out[mask] = node_cause(res, mask, res.node_flagged[node])[0]
    return holders, out


def score_features(features: Features, start: float | None = None, period: float | None = None,
                   jobs: list[str] | None = None, baselines: dict[str, float] | None = None,
                   learned: dict[str, pd.DataFrame] | None = None,
                   paces: dict[str, float] | None = None) -> dict[str, JobResult]:
    period = period or infer_period(features.times)
    if start is None:
        start = float(features.times[0]) if len(features.times) else 0.0
    baselines, learned, paces = baselines or {}, learned or {}, paces or {}
    return {job: score_job(features, job, start, period, baselines.get(job), learned.get(job), paces.get(job))
            for job in (jobs or features.jobs())}
