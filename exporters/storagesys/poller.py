"""Polls every target concurrently (at most max_concurrency at once), each within timeout_s, and keeps
the latest result per target for ``/metrics``. A target's failure is its own: it reads as
``lockstep_storage_system_up{target} 0`` and a failure counted by reason; the others stay as they are.
Each answer is read per source (server, gateway) and summed by the target's ``monotonic.CounterSums``: the
summed counters never go backwards when one source restarts or leaves the answer. A kind read by more than one GET
(WEKA: a JSON-RPC login and calls) has its own reader per target instead (``READERS``), under the same timeout,
failure reasons and isolation.

A target may opt in to a further endpoint of its kind (``PARTS``: VAST's per-view ``/api/prometheusmetrics/views``,
``views: true``), or a kind with a reader to a further read of its reader's (``Reader.parts``: WEKA's per-host
statistics, ``per_host: true``). Such a part is read beside the kind's own endpoint, within a timeout_s of its own
begun with the poll; an endpoint's is parsed and summed apart (its own ``CounterSums``, so its sources never meet the
target's), a reader's part keeps its own state in its reader. A part that fails
(no answer, an error status, an answer not in its format) loses its own series only: the target stays up with the
rest of its series, the failure is counted in ``lockstep_storage_system_poll_failures_total`` by its reason, and
logged once per outage of that part. Its counters go on from where they were once it answers again."""
from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, NamedTuple, Protocol

import aiohttp

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import cephrgw, minio, vast, wekarpc
from lockstep.exporters.storagesys.config import StorageConfig, Target
from lockstep.exporters.storagesys.errors import PollError
from lockstep.exporters.storagesys.fetch import get_text, ssl_context
from lockstep.exporters.storagesys.monotonic import CounterSums
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.rounds import every
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.storage")
# kind -> (endpoint path, parser of its answer into samples per source)
KINDS: dict[str, tuple[str, Callable[[str, str], dict[str, list[Sample]]]]] = {
    "minio": (minio.METRICS_PATH, minio.read_sources),
    "ceph-rgw": (cephrgw.METRICS_PATH, cephrgw.read_sources),
    "vast": (vast.METRICS_PATH, vast.read_sources),
}


@dataclass(frozen=True)
class Part:
    """A further endpoint of a kind that a target opts in to; ``name`` is the config key that turns it on."""

    name: str
    path: str
    parse: Callable[[str, str], dict[str, list[Sample]]]   # as KINDS's: target and answer in, samples per source out
    wanted: Callable[[Target], bool]


# kind -> the parts a target of that kind may opt in to
PARTS: dict[str, tuple[Part, ...]] = {
    "vast": (Part("views", vast.VIEWS_PATH, vast.read_view_sources, lambda t: t.views),),
}


class Reader(Protocol):
    async def read(self) -> list[Sample]: ...

    def parts(self) -> dict[str, Callable[[], Awaitable[list[Sample]]]]:
        """The parts the target opted in to, by name (the config key), each a read of its own."""
        ...


# kind -> its reader's constructor (target, session, TLS context, max_answer_bytes): one reader per target, holding
# what the kind keeps between polls (WEKA: its tokens, the minutes counted, the node and host lists)
READERS: dict[str, Callable[..., Reader]] = {"weka": wekarpc.WekaReader}


class PartFailure(NamedTuple):
    part: str
    reason: str
    error: str


@dataclass(frozen=True)
class TargetResult:
    up: bool
    samples: tuple[Sample, ...]
    duration_s: float
    error: str | None = None
    reason: str | None = None
    failed_parts: tuple[PartFailure, ...] = ()   # of a target up: its parts that failed, their series left out


class Poller:
    def __init__(self, config: StorageConfig, session: aiohttp.ClientSession) -> None:
        self.config, self.session = config, session
        self.results: dict[str, TargetResult] = {}
        self.last_success: dict[str, float] = {}
        self.failures: dict[tuple[str, str], int] = {}
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._tls = {t.name: ssl_context(t) for t in config.targets}
        self._parts = {t.name: tuple(p for p in PARTS.get(t.kind, ()) if p.wanted(t)) for t in config.targets}
        # (target, part; "" for the target's own endpoint) -> its sums
        self._sums = {(t.name, part): CounterSums() for t in config.targets
                      for part in ("", *(p.name for p in self._parts[t.name]))}
        self._readers = {t.name: READERS[t.kind](t, session, self._tls[t.name], config.max_answer_bytes)
                         for t in config.targets if t.kind in READERS}
        # target -> (part name, its read) for each part it opted in to: an endpoint's GET, or its reader's own
        self._part_reads = {t.name: self._reads_of(t) for t in config.targets}
        # A poll that timed out leaves its parse running in its thread; the target's next poll waits for it
        # here rather than combine beside it (its sums then hold that answer too: they only ever move on).
        self._combining = {key: threading.Lock() for key in self._sums}
        self._parts_down: set[tuple[str, str]] = set()   # (target, part) failing since it was last logged

    def _reads_of(self, target: Target) -> tuple[tuple[str, Callable[[], Awaitable[list[Sample]]]], ...]:
        reader = self._readers.get(target.name)
        if reader is not None:
            return tuple(reader.parts().items())
        return tuple((part.name, functools.partial(self._get_and_parse, target, part.name, part.path, part.parse))
                     for part in self._parts[target.name])

    async def _read(self, target: Target) -> list[Sample]:
        reader = self._readers.get(target.name)
        if reader is not None:
            return await reader.read()
        path, parse = KINDS[target.kind]
        return await self._get_and_parse(target, "", path, parse)

    async def _get_and_parse(self, target: Target, part: str, path: str,
                             parse: Callable[[str, str], dict[str, list[Sample]]]) -> list[Sample]:
        text = await get_text(self.session, target, path, self._tls[target.name], self.config.max_answer_bytes)
        # thousands of buckets: off the loop
        return await asyncio.to_thread(self._parse, (target.name, part), parse, text)

    def _parse(self, key: tuple[str, str], parse: Callable[[str, str], dict[str, list[Sample]]],
               text: str) -> list[Sample]:
        sources = parse(key[0], text)
        with self._combining[key]:
            return self._sums[key].combine(sources)

    async def _attempt(self, target: Target, read: Callable[[], Awaitable[list[Sample]]], part: str = "") -> TargetResult:
        """``read`` within timeout_s: its samples, or why it failed (a bug in reading is logged with its traceback)."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.config.timeout_s):
                found = await read()
        except TimeoutError:
            return TargetResult(False, (), time.perf_counter() - started,
                                f"no answer within {self.config.timeout_s:g}s", "timeout")
        except PollError as exc:
            return TargetResult(False, (), time.perf_counter() - started, str(exc), exc.reason)
        except Exception as exc:  # a bug in reading one kind loses that target's poll, never the polling
            log.exception("storage target poll raised", extra=kv(target=target.name, **({"part": part} if part else {})))
            return TargetResult(False, (), time.perf_counter() - started, f"{type(exc).__name__}: {exc}", "internal")
        return TargetResult(True, tuple(found), time.perf_counter() - started)

    async def poll(self, target: Target) -> TargetResult:
        """One poll: the wait for a slot is not counted against the target's timeout_s. The target's parts run
        beside its own read, each within its own timeout_s (begun with this poll, awaited outside the target's, so
        that a hung part never times the target out); a target down cancels them."""
        async with self._slots:
            started = time.perf_counter()
            parts = [(name, asyncio.create_task(self._attempt(target, read, name)))
                     for name, read in self._part_reads[target.name]]
            try:
                result = await self._attempt(target, functools.partial(self._read, target))
                if not result.up:
                    return result
                samples, failed = list(result.samples), []
                for name, task in parts:
                    got = await task
                    if got.up:
                        samples += got.samples
                    else:
                        failed.append(PartFailure(name, got.reason or "connect", got.error or ""))
            finally:
                for _, task in parts:
                    task.cancel()   # those not done: the target is down, or this poll was cancelled
            return TargetResult(True, tuple(samples), time.perf_counter() - started, failed_parts=tuple(failed))

    def _count_parts(self, target: Target, result: TargetResult) -> None:
        """A target up: each failed part counted by its reason, and logged once per outage of that part."""
        failed = {f.part: f for f in result.failed_parts}
        for name, _ in self._part_reads[target.name]:
            key, failure = (target.name, name), failed.get(name)
            if failure is None:
                if key in self._parts_down:
                    self._parts_down.discard(key)
                    log.info("storage target part recovered", extra=kv(target=target.name, part=name))
                continue
            self.failures[(target.name, failure.reason)] = self.failures.get((target.name, failure.reason), 0) + 1
            if key not in self._parts_down:
                self._parts_down.add(key)
                log.warning("storage target part failed, the rest read", extra=kv(
                    target=target.name, part=name, reason=failure.reason, err=failure.error))

    async def poll_and_store(self, target: Target) -> None:
        result = await self.poll(target)
        previous = self.results.get(target.name)
        self.results[target.name] = result
        if result.up:
            self.last_success[target.name] = time.time()
            if previous is not None and not previous.up:
                log.info("storage target recovered", extra=kv(target=target.name))
            self._count_parts(target, result)
            return
        key = (target.name, result.reason or "connect")
        self.failures[key] = self.failures.get(key, 0) + 1
        if previous is None or previous.up:  # once per outage, not every interval
            log.warning("storage target poll failed", extra=kv(target=target.name, reason=result.reason,
                                                                err=result.error))

    async def poll_all(self) -> None:
        await asyncio.gather(*(self.poll_and_store(t) for t in self.config.targets))

    async def run(self) -> None:
        """Poll forever, one round per interval; a round never overlaps the next."""
        await every(self.config.interval_s, self.poll_all)

    def target_samples(self, target: Target) -> Iterable[Sample]:
        yield Sample(m.TARGET_INFO, (target.name, target.kind, target.url), 1.0)
        for (name, reason), count in sorted(self.failures.items()):
            if name == target.name:
                yield Sample(m.POLL_FAILURES, (name, reason), float(count))
        result = self.results.get(target.name)
        if result is None:
            return  # not polled yet: unknown is not down
        yield from result.samples
        yield Sample(m.UP, (target.name,), 1.0 if result.up else 0.0)
        yield Sample(m.POLL_DURATION, (target.name,), result.duration_s)
        if target.name in self.last_success:
            yield Sample(m.LAST_SUCCESS, (target.name,), self.last_success[target.name])

    def samples(self) -> Iterable[Sample]:
        for target in self.config.targets:
            yield from self.target_samples(target)
