"""Straggler scoring per GPU and per node within a job (pure, over ``lockstep.analytics.frame.features`` matrices).

A straggler is a GPU that *became* slower than its peers, against its own history, by clearly more
than the job's normal spread (``lockstep.analytics.scoring.relative``): each pace signal is taken relative to the
job's median sample by sample, against the GPU's usual level among its peers, and the change must
reach ``K`` times the job's own robust spread of it (at least a floor per signal). A difference the
GPU has had since it started is imbalance (``lockstep.analytics.scoring.imbalance``), not a straggler; a GPU faster
than the job's median is never one. So the reference holds with a fast minority, a slow majority
and two groups: none of them changes a GPU's standing among its peers.

Signals: compute activity (in lockstep training the slow rank stays busy while its peers wait in
the collective), the rank's own step time (``lockstep_rank_step_seconds``, where the job exports
it), its collectives' arrival (NCCL Inspector's execution time, inverted: the rank that arrives last
at a synchronous all-reduce waits least in it, so the shortest time marks it; held 30 s between the
plugin's dumps), the first two averaged over ``SMOOTH_S`` (steps jitter by several percent on real jobs), SM clock, rail
throughput, each the same way; a throttling clock-event reason judged one by
one (a reason the GPU did not usually hold and at most half the job holds: ``sw_power_cap`` on most
of a busy job does not hide one GPU's thermal slowdown); transmit-wait well above the peers'. A GPU
is a candidate in a sample when at least two signals agree, flagged after ``PERSIST_S`` of
candidate samples in a row (a missing sample neither breaks nor extends the run). When most GPUs of
a node run slow together the node is reported (``gpu`` None): its median GPU's pace against the
job's spread of node medians, which sees through per-GPU noise.

A GPU slow since it (or the job) started is a straggler too when its own hardware explains it
(``lockstep.analytics.scoring.cause``): its usual pace among its peers slower than the median by what
counts as imbalance (``imbalance.FLOOR``), with hardware evidence that would explain that by itself
(the second signal that agrees), for ``PERSIST_S``. It is a hardware straggler from the moment its
usual pace is known (``READY`` samples), scored against the job median; without that evidence it
stays imbalance.

What ``make eval`` measures of these choices on the shipped scenarios with realistic noise: no
false flag on the fault-free ones (the largest pair of agreeing signals in any 20 s of a 1,024-GPU
hour reaches ~0.7 of its bars). A robust covariance of the signals (``lockstep.analytics.evaluation.models``) finds
no more. An IsolationForest over the signal strengths is not used (bench/bench_isolation_forest.py: it
found no window the rule misses and costs about the CPU of the scoring pass itself).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from lockstep.analytics.frame.features import REASON_PREFIX, Features
from lockstep.analytics.scoring import cause, imbalance, relative
from lockstep.analytics.scoring.bynode import nanmedian, node_columns, per_node
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.analytics.scoring.rolling import rolling_mean
from lockstep.analytics.scoring.stall import JobSignals

K = 4.0                   # the job's normal spreads a change must reach to count
WEAK = 2.0                # ...and where a confirmed slowdown's cost is counted from
# ...and at least this (log ≈ relative); a late rank's collectives shorten by its peers' wait, a large share of
# a call against NCCL Inspector's per-interval jitter of a few percent
FLOORS = {"work": 0.06, "step": 0.06, "clock": 0.05, "tx": 0.15, "collective": 0.25}
PACE = ("work", "step")   # signals of the rank's own pace (a node-wide slowdown shows in these)
WAIT_EXCESS = 3.0         # xmit-wait ≥ 3× the peers' median
PERSIST_S = 20.0          # consecutive seconds of agreement before a flag
SMOOTH_S = 15.0           # pace signals averaged over this span
NODE_SHARE = 0.75         # this share of a node's GPUs slow together → node-wide slowdown
BASELINE_S = 300.0        # a GPU's usual level is learned over its first active samples of this span...
READY = 6                 # ...and judged against once it holds this many samples
PARALLEL_GPUS = 4096      # from this many GPUs, the pace signals' drifts are computed side by side


@dataclass(frozen=True)
class StragglerResult:
    scores: np.ndarray        # times × GPUs, 0 normal … 1 (how much slower than usual among its peers)
    votes: np.ndarray         # times × GPUs, number of agreeing signals
    flagged: np.ndarray       # times × GPUs, bool, after persistence
    node_flagged: dict[str, np.ndarray]   # node → bool per sample (node-wide slowdown)
    holding: np.ndarray       # times × GPUs: flagged, or in the candidate run that led to a flag
    node_holding: dict[str, np.ndarray]
    drifts: dict[str, relative.Drift]     # per pace signal (work, step, clock, tx)
    bars: dict[str, float]                # per pace signal: the change that counts
    hits: dict[str, np.ndarray]           # per voting signal (and "reason"): times × GPUs, bool
    reasons: dict[str, np.ndarray]        # per clock-event reason: times × GPUs, bool, counted as a vote
    hardware: cause.Hardware              # each GPU's hardware signals (its cause is judged on them)
    since_start: np.ndarray               # times × GPUs: flagged as slow since it started, its hardware explaining it
    usual: np.ndarray                     # times × GPUs: its usual pace among its peers (log, causal; NaN: unknown)


def smoothed(x: np.ndarray, active: np.ndarray, samples: int) -> np.ndarray:
    """Causal mean over the last ``samples`` active samples (stalls of other causes left out)."""
    return rolling_mean(np.where(active[:, None], x, np.nan), samples)


def slowness(js: JobSignals, sig: dict[str, np.ndarray], active: np.ndarray, period: float) -> dict[str, np.ndarray]:
    """Per signal, a times × GPUs measure that grows when the GPU is slower (NaN where absent). The
    pace signals jitter step by step (real jobs: a few percent per iteration across ranks), so they
    are averaged over ``SMOOTH_S``; clock and throughput are read as they come."""
    n = max(1, round(SMOOTH_S / period))
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(sig["step"] > 0, sig["step"], np.nan)      # a step of 0 s measures nothing
        late = 1.0 / np.where(sig["collective"] > 0, sig["collective"], np.nan)   # the inversion: shortest = last
        return {"work": smoothed(js.work, active, n), "step": smoothed(step, active, n),
                "clock": 1.0 / sig["clock"], "tx": 1.0 / sig["tx"], "collective": late}


def reason_votes(sig: dict[str, np.ndarray], active: np.ndarray, calm: np.ndarray, samples: int,
                 ready: int) -> dict[str, np.ndarray]:
    """Per throttling reason: held now, by at most half the job's GPUs now, and not the GPU's habit:
    held in under half of its first ``samples`` calm samples (active, its pace as usual; causal,
    from ``ready`` of them). A GPU that flickers in and out of sw_power_cap all along keeps doing so;
    one whose thermal slowdown comes with a slower pace has no such habit."""
    out = {}
    taken = active[:, None] & calm
    count = np.cumsum(taken, axis=0, dtype=np.int32)
    first = taken & (count <= samples)
    seen = np.minimum(count, samples)
    known = seen >= ready
    for name, held in sig.items():
        if not name.startswith(REASON_PREFIX):
            continue
        now = held > 0                        # NaN: not held
        votes = now & known & ~(now.mean(axis=1, keepdims=True) > 0.5)
        if votes.any():   # its habit: held in under half its first calm samples (2 x held < seen: no division)
            votes &= 2 * np.cumsum(now & first, axis=0, dtype=np.int32) < seen
        out[name[len(REASON_PREFIX):]] = votes
    return out


def signal_votes(js: JobSignals, sig: dict[str, np.ndarray], active: np.ndarray, period: float,
                 prior: dict[str, np.ndarray] | None = None):
    """Per-sample, per-GPU agreement count, and the drifts, bars, hits and reason votes behind it."""
    samples, ready = max(READY, round(BASELINE_S / period)), READY
    prior = prior or {}
    paces = slowness(js, sig, active, period)

    def drift(name: str) -> relative.Drift:
        return relative.drift(paces[name], active, samples, FLOORS[name], ready, prior.get(name))

    if paces["work"].shape[1] < PARALLEL_GPUS:
        drifts = {name: drift(name) for name in paces}
    else:   # independent, and NumPy lets go of the GIL: a large job's drifts on every core
        with ThreadPoolExecutor(len(paces)) as pool:
            drifts = dict(zip(paces, pool.map(drift, paces)))
    bars = {name: relative.bar(d.spread, K, FLOORS[name]) for name, d in drifts.items()}
    with np.errstate(invalid="ignore"):
        hits = {name: d.excess >= bars[name] for name, d in drifts.items()}
    reasons = reason_votes(sig, active, ~(hits["work"] | hits["step"]), samples, ready)
    hits["reason"] = np.logical_or.reduce(list(reasons.values())) if reasons else np.zeros_like(hits["work"])
    wait = np.nan_to_num(sig["xmit_wait"])
    hits["wait"] = (wait > WAIT_EXCESS * np.median(wait, axis=1, keepdims=True)) & (wait > 0)
    votes = sum(h.astype(np.int8) for h in hits.values())
    return votes, drifts, bars, hits, reasons


def persistent(candidate: np.ndarray, samples: int, known: np.ndarray | None = None) -> np.ndarray:
    """True where the candidate has held for ``samples`` consecutive rows (per column); a row where
    ``known`` is False (a missed scrape) keeps the run as it was."""
    run = np.zeros(candidate.shape[1], dtype=np.int32)
    out = np.zeros_like(candidate, dtype=bool)
    for i, row in enumerate(candidate):
        step = np.where(row, run + 1, 0)
        run = step if known is None else np.where(known[i], step, run)
        out[i] = run >= samples
    return out


def whole_runs(flagged: np.ndarray, candidate: np.ndarray, gap: int = 0) -> np.ndarray:
    """``flagged`` extended back over the candidate run that led to each flag: once a slowdown is
    confirmed, the samples before the confirmation were lost to it too (used by the loss account);
    and over gaps of at most ``gap`` samples between two flags (a jittering slowdown that dips under
    the bar for a sample or two has not healed)."""
    out = flagged.copy()
    for i in range(len(out) - 2, -1, -1):
        out[i] |= out[i + 1] & candidate[i]
    if gap:
        seen = np.full(out.shape[1], -gap - 1)
        for i in range(len(out)):
            hit = out[i]
            short = hit & (i - seen > 1) & (i - seen <= gap + 1)
            for j in np.flatnonzero(short):
                out[seen[j] + 1:i, j] = True
            seen = np.where(hit, i, seen)
    return out


def _rising(drifts: dict[str, relative.Drift], active: np.ndarray) -> np.ndarray:
    """Pace already above the job's noise (``WEAK`` spreads) though not yet clearly slow: a slowdown
    that grows (a drifting rank) cost the job from there on, once it is confirmed."""
    out = np.zeros(drifts["work"].excess.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        for name in PACE:
            d = drifts[name]
            out |= d.excess >= WEAK * max(d.spread, 1e-9)
    return out & active[:, None]


def not_faster(drifts: dict[str, relative.Drift]) -> np.ndarray:
    """The GPU's pace is not faster than the job median now (its own step time where exported)."""
    step, work = drifts["step"].level, drifts["work"].level
    pace = np.where(np.isfinite(step), step, work)
    with np.errstate(invalid="ignore"):
        return ~(pace < 0.0)


def score(features: Features, job_id: str, js: JobSignals, causes: np.ndarray, period: float,
          prior: dict[str, np.ndarray] | None = None) -> StragglerResult:
    """``prior``: per pace signal, each GPU's usual level learned in an earlier window (NaN: learn it)."""
    cols = features.job_slice(job_id)
    sig = {name: m[:, cols] for name, m in features.signals.items()}
    # Other stalls are the stall classifier's business; a stall caused by a straggler is still scored.
    active = (causes == "") | (causes == "straggler")
    votes, drifts, bars, hits, reasons = signal_votes(js, sig, active, period, prior)
    change = np.fmax.reduce([drifts[s].excess for s in ("work", "step", "clock")])
    scores = np.where(active[:, None], np.clip(1.0 - np.exp(-np.nan_to_num(change)), 0.0, 1.0), 0.0)
    candidate = active[:, None] & (votes >= 2) & not_faster(drifts)
    # NCCL Inspector's time is a mean over its 30 s interval, not a sample: while it still shows the rank arriving
    # last, a sample where the other signals dip under their bars (a slow step's jitter) neither breaks a run nor
    # extends it, as a missed scrape does; on its own it never makes a candidate nor holds a flag
    known = np.isfinite(drifts["work"].level)
    bridge = known & hits["collective"] & ~candidate
    nodes = np.asarray(features.columns[cols].get_level_values("node"))
    node_cand = _node_candidates(nodes, drifts, active)
    samples = max(1, int(round(PERSIST_S / period)))
    node_flagged = {n: persistent(c[:, None], samples)[:, 0] for n, c in node_cand.items()}
    node_holding = {n: whole_runs(f[:, None], node_cand[n][:, None], samples)[:, 0] for n, f in node_flagged.items()}
    flagged = persistent(candidate, samples, known & ~bridge) & ~bridge
    holding = whole_runs(flagged, candidate | _rising(drifts, active), samples)
    for node, flags in node_holding.items():       # a node-wide slowdown is reported for the node only
        flagged[:, nodes == node] &= ~flags[:, None]
        holding[:, nodes == node] &= ~flags[:, None]
    hw = cause.hardware(sig, active)
    usual = usual_pace(drifts)
    since_start = persistent(active[:, None] & slow_since_start(usual) & hw.strong(usual), samples, known)
    with np.errstate(invalid="ignore"):
        scores = np.where(since_start, np.maximum(scores, 1.0 - np.exp(-np.nan_to_num(usual))), scores)
    return StragglerResult(scores, votes, flagged | since_start, node_flagged, holding, node_holding, drifts, bars,
                           hits, reasons, hw, since_start, usual)


def usual_pace(drifts: dict[str, relative.Drift]) -> np.ndarray:
    """Each GPU's usual pace among its peers as known at each sample (log, > 0 slower): its own step
    time where exported, else its compute activity."""
    step, work = drifts["step"].baseline, drifts["work"].baseline
    return np.where(np.isfinite(step), step, work)


def slow_since_start(usual: np.ndarray) -> np.ndarray:
    """Usual paces slower than the job median by the imbalance floor: what counts as imbalance. The
    job's spread of usual paces is no bar here: worker groups inflate it, and the hardware evidence
    that must agree is the second, independent signal."""
    centred = usual - nan_reduce(np.nanmedian, usual, axis=1)[:, None]
    with np.errstate(invalid="ignore"):
        return centred >= imbalance.FLOOR


def node_pace(drifts: dict[str, relative.Drift], nodes: np.ndarray, active: np.ndarray) -> tuple[dict, float]:
    """Per node, the median pace change of its GPUs (own step time where exported, else compute
    activity) per sample, and the job's robust spread of it: a node's GPUs averaged together see a
    node-wide slowdown through per-GPU noise that would hide it GPU by GPU."""
    step, work = drifts["step"].excess, drifts["work"].excess
    pace = np.where(np.isfinite(step), step, work)
    names, groups = node_columns(nodes)
    medians = per_node(pace, groups, nanmedian)
    several = np.asarray([len(g) >= 2 for g in groups], dtype=bool)
    medians = np.where(active[:, None] & several[None, :], medians, np.nan)
    out = {str(node): medians[:, k] for k, node in enumerate(names)}
    spread = relative.robust_scale(np.stack(list(out.values()))) if out else 0.0
    return out, spread


def _node_candidates(nodes: np.ndarray, drifts: dict[str, relative.Drift], active: np.ndarray) -> dict[str, np.ndarray]:
    """Nodes whose GPUs run slow together while the rest of the job does not: the node's median GPU
    has become clearly slower (against the job's spread of node medians), and ``NODE_SHARE`` of its
    GPUs agree that they are slower than usual (independent GPUs agreeing is the second signal)."""
    paces, spread = node_pace(drifts, nodes, active)
    bar = relative.bar(spread, K, min(FLOORS[s] for s in PACE))
    step, work = drifts["step"].excess, drifts["work"].excess
    if not paces:
        return {}
    with np.errstate(invalid="ignore"):
        slower = np.where(np.isfinite(step), step, work) > 0
        hit = np.stack(list(paces.values()), axis=1) >= bar          # times × nodes
        job_hit = hit.mean(axis=1)
        share = per_node(slower, node_columns(nodes)[1], np.mean)
        cand = hit & (share >= NODE_SHARE) & (job_hit < 0.5)[:, None]
    return {node: cand[:, k] for k, node in enumerate(paces) if cand[:, k].any()}


def performance(slowdown):
    """The reported score: the rank's speed relative to its usual pace among its peers (1.0 keeps
    up; 0.7 means it has become a 0.7x straggler), the convention of the contract's examples.
    Internally ``scores`` count the other way (1 - that)."""
    return np.round(1.0 - np.asarray(slowdown, dtype=float), 3)
