"""``lockstep analytics serve`` flags → one frozen, validated ``ServiceConfig``."""
from __future__ import annotations

import argparse
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

from lockstep.analytics.prom.answersize import SERVE_DEFAULT
from lockstep.analytics.prom.answersize import add_flag as add_max_answer_flag
from lockstep.analytics.prom.auth import PromAuth, auth_from_args, check_url
from lockstep.analytics.prom.auth import add_flags as add_prometheus_flags
from lockstep.exporters.toolkit.listen import ListenAddress, parse_listen_address
from lockstep.exporters.toolkit.webconfig import WebConfig
from lockstep.exporters.toolkit.webconfig import add_flags as add_web_flags


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def owns(self, job_id: str) -> bool:
        """Stable across replicas and restarts (crc32, not Python's salted ``hash``)."""
        return zlib.crc32(job_id.encode()) % self.count == self.index


def parse_shard(text: str) -> Shard:
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 0 <= int(index) < int(count):
        raise ValueError(f"--shard {text!r}: want i/n with 0 <= i < n, e.g. 0/2")
    return Shard(int(index), int(count))


@dataclass(frozen=True)
class ServiceConfig:
    prometheus_url: str
    listen: ListenAddress = ListenAddress("127.0.0.1", 9842)
    interval_s: float = 30.0           # between refreshes
    window_s: float = 900.0            # data scored per refresh
    step_s: float = 5.0                # query_range step: the sample period of the node agents
    timeout_s: float = 20.0            # per Prometheus request
    max_backoff_s: float = 300.0
    resume_lookback_s: float = 86400.0  # how old the exported counters of a job may be to resume them (0: never)
    refetch_steps: int = 1             # trailing steps of a held window asked for again (samples stored late)
    recorded_inputs: bool = True       # read the inputs' recorded series where the store holds them
    shard: Shard = Shard(0, 1)
    web_config: WebConfig | None = None
    prometheus_auth: PromAuth = PromAuth()   # how requests to prometheus_url authenticate
    max_answer_bytes: int = SERVE_DEFAULT    # of one Prometheus answer, decompressed (lockstep.analytics.prom.answersize)
    book_after_s: float | None = None  # --book-after: a running job's samples booked this old; None: ``settle_s``
    now: Callable[[], float] = field(default=time.time, compare=False)   # injected by tests

    @property
    def settle_s(self) -> float:
        """A running job's samples are booked in its loss counters once this old (their cost is known once
        later samples confirmed it: ``lockstep.analytics.scoring.ledger.SETTLE_S``); half the window where
        that is shorter than twice as much (a held window must still hold them then). ``book_after_s``
        replaces it."""
        if self.book_after_s is not None:
            return self.book_after_s
        from lockstep.analytics.scoring.ledger import SETTLE_S  # numpy and the scorers: not for flag parsing

        return min(SETTLE_S, self.window_s / 2)

    def advice(self) -> list[str]:
        """Settings that are allowed but cost the results something, each said in a line (logged at start)."""
        from lockstep.analytics.scoring.slowdown import BASELINE_S

        out = []
        if self.window_s < BASELINE_S:
            out.append(f"--window {self.window_s:g}s is shorter than a job-wide slowdown's baseline ({BASELINE_S:g}s): "
                       "a slowdown longer than the window may be given a cause by part of it only (replayed with 300 s "
                       "windows, a power cap's slowdown was booked half to storage)")
        return out

    @property
    def fetch_budget_s(self) -> float:
        """A refresh fetches new windows for at most its interval (at least one request's timeout), then
        scores what it has; the next refresh, started at once, goes on from there."""
        return max(self.interval_s, self.timeout_s)

    def __post_init__(self) -> None:
        check_url(self.prometheus_url, self.prometheus_auth)
        for name in ("interval_s", "window_s", "step_s", "timeout_s"):
            if not 0 < getattr(self, name) < math.inf:   # NaN fails too
                raise ValueError(f"{name} must be positive and finite, got {getattr(self, name)!r}")
        if not 0 <= self.resume_lookback_s < math.inf:
            raise ValueError(f"--resume-lookback must be >= 0 and finite, got {self.resume_lookback_s!r}")
        if self.window_s < self.interval_s:
            raise ValueError(f"--window ({self.window_s}s) must be at least --interval ({self.interval_s}s): "
                             "the time between refreshes would never be scored")
        if self.window_s < 4 * self.step_s:
            raise ValueError(f"--window ({self.window_s}s) must hold at least 4 steps of {self.step_s}s")
        if self.max_answer_bytes <= 0:
            raise ValueError(f"--prometheus-max-answer-size must be positive, got {self.max_answer_bytes!r}")
        if self.book_after_s is not None and not 0 <= self.book_after_s <= self.window_s / 2:
            raise ValueError(f"--book-after must be from 0 to half of --window ({self.window_s / 2:g}s), "
                             f"got {self.book_after_s!r}")
        if not 1 <= self.refetch_steps <= self.window_s / self.step_s:
            raise ValueError(f"--refetch-steps must be from 1 to the steps of --window, got {self.refetch_steps!r}")


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    add_prometheus_flags(p)
    add_max_answer_flag(p, SERVE_DEFAULT)
    add_web_flags(p, ":9842")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between refreshes")
    p.add_argument("--window", type=float, default=900.0, help="seconds of data scored per refresh")
    p.add_argument("--step", type=float, default=5.0, help="query_range step (the scrape interval)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per Prometheus request")
    p.add_argument("--resume-lookback", type=float, default=86400.0,
                   help="seconds back to look for a job's loss counters as this service last exported them "
                        "(scraped into Prometheus), to continue them after a restart or a shard move; 0 disables")
    p.add_argument("--shard", default="0/1", help="score only the jobs of shard i of n (stable hash of job_id)")
    p.add_argument("--recorded-inputs", choices=("auto", "off"), default="auto",
                   help="read each input from the series lockstep's recording rules record for it (one per GPU, HCA or "
                        "node; group lockstep.analytics-inputs of the generated rules, evaluated at --step) where the "
                        "store holds them when a job's window is fetched whole, and the fleet pass's inputs (group "
                        "lockstep.fleet-inputs, every minute) where they cover its 15 minutes; off: always reduce the "
                        "raw series")
    p.add_argument("--book-after", type=float, default=None, metavar="SECONDS",
                   help="how old a running job's sample is before its loss counters and ledger book it: a slowdown is "
                        "confirmed after it lasted and counted from its start, so newer samples may still change cause "
                        "(default: 90, or half of --window if that is less; the samples still waiting when the job "
                        "ends are booked then; 0 books each at once)")
    p.add_argument("--refetch-steps", type=int, default=1,
                   help="trailing steps of each job's held window asked for again on every refresh, for samples that "
                        "reach the store late (a slow scrape; remote_write batching: its batch_send_deadline in steps, "
                        "plus one)")


def config_from_args(args: argparse.Namespace) -> ServiceConfig:
    from lockstep.exporters.toolkit.webconfig import load_web_config

    web_file = getattr(args, "web.config.file")
    return ServiceConfig(
        prometheus_url=args.prometheus_url, listen=parse_listen_address(getattr(args, "web.listen-address")),
        interval_s=args.interval, window_s=args.window, step_s=args.step, timeout_s=args.timeout,
        resume_lookback_s=args.resume_lookback, refetch_steps=args.refetch_steps,
        recorded_inputs=args.recorded_inputs == "auto",
        shard=parse_shard(args.shard), web_config=load_web_config(web_file) if web_file else None,
        prometheus_auth=auth_from_args(args), max_answer_bytes=args.max_answer_bytes, book_after_s=args.book_after)
