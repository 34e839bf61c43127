"""``lockstep analytics serve``: refresh scores from Prometheus every interval, serve them.

Endpoints: ``/metrics`` (analytics metrics of the catalog, text or OpenMetrics), ``/api/v1/jobs``,
``/api/v1/jobs/{job_id}`` (JSON). Prometheus down or slow: the last results stay served, marked
stale, and the refresh is retried with a doubling backoff; the service reports its own health.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import math
import time
from dataclasses import dataclass, field

import aiohttp
import pandas as pd
from aiohttp import web

from analytics import promql, source_prom
from analytics.config import ServiceConfig
from analytics.frame import build_features
from analytics.resume import resume
from analytics.score import JobResult, score_features
from analytics.state import Health, LossCounters, Results, current, health_samples, job_samples
from exporters.exposition import Encoder, render_openmetrics, render_text
from exporters.logs import kv
from exporters.version import VERSION
from exporters.web import auth_middleware, landing_page

log = logging.getLogger("lockstep.analytics")


@dataclass
class ServiceState:
    results: Results = field(default_factory=lambda: Results({}))
    health: Health = field(default_factory=Health)
    losses: dict[str, LossCounters] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    encoder: Encoder = field(default_factory=Encoder)
    refreshed: asyncio.Event = field(default_factory=asyncio.Event)   # set after each attempt (tests wait on it)


CONFIG = web.AppKey("config", ServiceConfig)
STATE = web.AppKey("state", ServiceState)
SESSION = web.AppKey("session", aiohttp.ClientSession)


def score_window(frames: dict[str, pd.DataFrame], start: float, step: float,
                 baselines: dict[str, float]) -> dict[str, JobResult]:
    """Blocking: score each job's frame (runs in a worker thread)."""
    out = {}
    for job_id, frame in frames.items():
        features = build_features(frame)
        if job_id in features.jobs():
            out[job_id] = score_features(features, start, step, [job_id], baselines)[job_id]
    return out


async def refresh_once(app: web.Application) -> None:
    cfg, state, session = app[CONFIG], app[STATE], app[SESSION]
    started = time.monotonic()
    end = math.floor(cfg.now() / cfg.step_s) * cfg.step_s
    window = source_prom.Window(end - cfg.window_s + cfg.step_s, end, cfg.step_s)
    seen = await source_prom.list_jobs(session, cfg.prometheus_url, end, cfg.timeout_s)
    valid, rejected = [], []
    for job_id in seen:
        (valid if promql.JOB_ID.fullmatch(job_id) else rejected).append(job_id)
    if rejected and rejected != list(state.health.rejected_job_ids):
        log.warning("job ids rejected (not queried)", extra=kv(job_ids=repr(rejected)[:500]))
    mine = [j for j in valid if cfg.shard.owns(j)]
    if cfg.resume_lookback_s:
        new = [j for j in mine if j not in state.losses]
        state.losses.update(await resume(session, cfg.prometheus_url, new, end, cfg.resume_lookback_s, cfg.timeout_s))
    await _catch_up(session, cfg, state, mine, window)
    frames, failed = await _fetch_jobs(session, cfg, mine, window)
    scored = await asyncio.to_thread(score_window, frames, window.start, cfg.step_s, dict(state.baselines))
    # a job whose queries failed keeps its last view and counters (failure stays local)
    views = {j: state.results.jobs[j] for j in failed if j in state.results.jobs}
    for job_id, res in scored.items():
        _remember_baseline(state, job_id, res)
        counters = state.losses.setdefault(job_id, LossCounters())
        if not counters.behind(window.start, cfg.step_s):   # else the gap before it is caught up first
            counters.add(res, cfg.step_s)
        views[job_id] = {**current(res), "loss": _loss_view(counters)}
    for gone in set(state.losses) - set(views):   # finished jobs: forget them (label churn)
        state.losses.pop(gone, None)
        state.baselines.pop(gone, None)
    state.results = Results(views, time.time(), {j: copy.deepcopy(state.losses[j]) for j in views})
    state.health = Health(up=True, stale=False, last_success=time.time(), failures=state.health.failures,
                          duration_s=time.monotonic() - started, rejected_job_ids=tuple(rejected),
                          last_error="; ".join(f"job {j}: {e}" for j, e in failed.items())[:2000])


def _remember_baseline(state: ServiceState, job_id: str, res: JobResult) -> None:
    """A job's peer baseline, kept for the windows a straggler fills completely."""
    if res.baseline is not None:
        state.baselines[job_id] = res.baseline


async def _catch_up(session: aiohttp.ClientSession, cfg: ServiceConfig, state: ServiceState, jobs: list[str],
                    window: source_prom.Window) -> None:
    """Account the time between a job's last counted sample and ``window`` (Prometheus was unreachable
    for longer than a window): one window-sized chunk per job and refresh, oldest first, so a long gap
    costs extra refreshes, never one huge query; the job's counters skip the current window until the
    gap is closed. A chunk without data (Prometheus itself was down) is passed over: no data, no
    account; a chunk that fails is retried next time."""
    for job_id in jobs:
        counters = state.losses.get(job_id)
        if counters is None or not counters.behind(window.start, cfg.step_s):
            continue
        # From the last counted sample: counters become rates over the step before each sample, so the
        # first sample of any window is context only (never new to the counters).
        first = counters.accounted_until
        chunk = source_prom.Window(first, min(first + cfg.window_s - cfg.step_s, window.start - cfg.step_s), cfg.step_s)
        try:
            frame = await source_prom.fetch_job(session, cfg.prometheus_url, job_id, chunk, cfg.timeout_s)
        except source_prom.PrometheusError as exc:
            log.warning("catch-up failed; retried next refresh", extra=kv(job_id=job_id, err=str(exc)[:500]))
            continue
        scored = await asyncio.to_thread(score_window, {job_id: frame}, chunk.start, cfg.step_s,
                                         dict(state.baselines))
        if job_id in scored:
            res = scored[job_id]
            _remember_baseline(state, job_id, res)   # older than the current window's, which replaces it after
            counters.add(res, cfg.step_s)
        counters.accounted_until = max(counters.accounted_until, chunk.end)
        log.info("caught up", extra=kv(job_id=job_id, start=chunk.start, end=chunk.end, behind_s=window.start - chunk.end))


async def _fetch_jobs(session: aiohttp.ClientSession, cfg: ServiceConfig, jobs: list[str],
                      window: source_prom.Window) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Frames of ``jobs``, one job at a time (a 4,096-GPU job's frame is large enough on its own),
    and the errors of those that failed; when every job fails, Prometheus itself is the problem."""
    frames, failed = {}, {}
    for job_id in jobs:
        try:
            frames[job_id] = await source_prom.fetch_job(session, cfg.prometheus_url, job_id, window, cfg.timeout_s)
        except source_prom.PrometheusError as exc:
            failed[job_id] = str(exc)
    if failed and not frames:
        raise source_prom.PrometheusError(next(iter(failed.values())))
    if failed:
        log.warning("jobs not refreshed; serving their last results", extra=kv(errors=repr(failed)[:500]))
    return frames, failed


def _loss_view(c: LossCounters) -> dict:
    goodput = c.goodput()
    return {"allocated_gpu_seconds": round(c.allocated, 1),
            "lost_gpu_seconds": {k: round(v, 1) for k, v in c.lost.items()},
            "goodput_ratio": round(goodput, 4) if goodput is not None else None}


async def refresh_loop(app: web.Application) -> None:
    cfg, state = app[CONFIG], app[STATE]
    failed_in_row = 0
    while True:
        try:
            await refresh_once(app)
            failed_in_row, delay = 0, cfg.interval_s
        except Exception as exc:  # failure stays local: keep serving the last results
            failed_in_row += 1
            delay = min(cfg.max_backoff_s, cfg.interval_s * 2 ** (failed_in_row - 1))
            h = state.health
            h.up, h.stale, h.failures = False, bool(state.results.jobs), h.failures + 1
            h.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("refresh failed; serving last results", extra=kv(err=h.last_error, retry_in_s=delay))
        state.refreshed.set()
        await asyncio.sleep(delay)


async def _session_ctx(app: web.Application):
    async with aiohttp.ClientSession(headers={"User-Agent": f"lockstep-analytics/{VERSION}"}) as session:
        app[SESSION] = session
        yield


async def _refresh_ctx(app: web.Application):
    task = asyncio.create_task(refresh_loop(app))
    yield
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def create_app(config: ServiceConfig) -> web.Application:
    from analytics import routes

    app = web.Application(middlewares=[auth_middleware(config.web_config)] if config.web_config else [])
    app[CONFIG] = config
    app[STATE] = ServiceState()
    app.cleanup_ctx.append(_session_ctx)
    app.cleanup_ctx.append(_refresh_ctx)
    routes.add_routes(app)
    return app


def render_metrics(state: ServiceState, openmetrics: bool) -> str:
    families: dict = {}
    results = state.results            # one refresh's snapshot (this runs in a worker thread)
    state.encoder.add(families, health_samples(state.health, len(results.jobs)))
    for job_id, view in results.jobs.items():
        state.encoder.add(families, job_samples(view, results.losses[job_id]))
    return render_openmetrics(families) if openmetrics else render_text(families)


def index_response(config: ServiceConfig) -> web.Response:
    return landing_page("lockstep analytics", "Straggler, stall and utilization-loss scores for training jobs.",
                        {"Metrics": "/metrics", "Jobs": "/api/v1/jobs"},
                        {"version": VERSION, "prometheus": config.prometheus_url,
                         "shard": f"{config.shard.index}/{config.shard.count}"})
