"""Polls every target concurrently (bounded by a semaphore), each within its own deadline, and
keeps the latest result per target for ``/metrics``. A target's failure is its own: it turns into
``lockstep_redfish_up{target} 0`` and the loss of that target's readings, nothing else."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable, Iterable

from lockstep.exporters.catalog import power as m
from lockstep.exporters.power import pollreport
from lockstep.exporters.power.bmc import poll_bmc
from lockstep.exporters.power.cdu import poll_cdu
from lockstep.exporters.power.config import PowerConfig, Target
from lockstep.exporters.power.ipmi import poll_ipmi
from lockstep.exporters.power.pdu import poll_pdu
from lockstep.exporters.power.redfish import MAX_MEMBERS, Fetch, Redfish, RedfishError, Structure
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.rounds import every
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.power")
# Structural resources (service root, collections, chassis/PDU/CDU documents) are re-read this
# often and after a poll that found them out of date (a 404, a link gone); in between a BMC poll is
# 2 requests instead of 11 (DMTF rackmount mockup). A timeout, a 5xx or a refused connection keeps
# them: the layout did not change, and rediscovering would cost a struggling BMC 4-11 requests.
STRUCTURE_TTL_S = 600.0
WALKS: dict[str, Callable[[Target, Fetch], Awaitable[list[Sample]]]] = {
    "bmc": poll_bmc, "pdu": poll_pdu, "cdu": poll_cdu}


@dataclass(frozen=True)
class TargetResult:
    up: bool
    samples: tuple[Sample, ...]
    duration_s: float
    error: str | None = None
    invalid_readings: int = 0   # readings left out as not finite numbers
    skipped_members: int = 0    # array members past MAX_MEMBERS, never read (a failed poll counts what it saw)
    long_labels: int = 0        # label values from the answers shortened to MAX_LABEL_CHARS


class Poller:
    def __init__(self, config: PowerConfig, redfish: Redfish) -> None:
        self.config, self.redfish = config, redfish
        self.results: dict[str, TargetResult] = {}
        self.last_success: dict[str, float] = {}
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._structure: dict[str, tuple[float, Structure]] = {}
        self._ipmi: dict[str, asyncio.Lock] = {}  # one ipmitool per target, however many /probe calls
        self._left_out: dict[str, tuple[bool, bool]] = {}  # (skipped members, invalid readings) last logged
        self._deadlines: set[asyncio.Timeout] = set()  # of the polls in progress, moved to now by close()
        self.closing = False

    def close(self) -> None:
        """End every poll in progress now, each reading as failed, and any started later at once: at
        shutdown a /probe in flight answers instead of holding SIGTERM for the rest of its budget."""
        self.closing = True
        now = asyncio.get_running_loop().time()
        for deadline in self._deadlines:
            deadline.reschedule(now)

    @contextlib.asynccontextmanager
    async def _deadline(self, when: float | None) -> AsyncIterator[None]:
        """``asyncio.timeout_at(when)`` that ``close`` can move to now."""
        async with asyncio.timeout_at(asyncio.get_running_loop().time() if self.closing else when) as deadline:
            self._deadlines.add(deadline)
            try:
                yield
            finally:
                self._deadlines.discard(deadline)

    def _structure_of(self, name: str) -> Structure:
        entry = self._structure.get(name)
        if entry is None or time.monotonic() - entry[0] > STRUCTURE_TTL_S:
            entry = self._structure[name] = (time.monotonic(), Structure())
        return entry[1]

    async def _walk(self, target: Target, timeout_s: float) -> list[Sample]:
        if target.kind == "ipmi":
            async with self._ipmi.setdefault(target.name, asyncio.Lock()):
                return await poll_ipmi(target, timeout_s)
        fetch = self.redfish.fetcher(target, timeout_s, self._structure_of(target.name))
        return await WALKS[target.kind](target, fetch)

    async def poll(self, target: Target, budget_s: float | None = None) -> TargetResult:
        """One poll of ``target``: every request within timeout_s, the whole walk within budget_s.
        A caller's budget (a /probe racing Prometheus' scrape timeout) includes the wait for a free
        slot, which hung targets may hold; a background poll (no budget) waits its turn in the round
        and gets its own full deadline, so a large fleet is slow rather than falsely down."""
        loop = asyncio.get_running_loop()
        budget = budget_s if budget_s is not None else max(self.config.interval_s, self.config.timeout_s)
        deadline = loop.time() + budget
        try:
            async with self._deadline(deadline if budget_s is not None else None):
                await self._slots.acquire()
        except TimeoutError:
            if self.closing:
                return TargetResult(False, (), 0.0, "exporter shutting down")
            return TargetResult(False, (), 0.0, "TimeoutError: no free poll slot within the probe budget")
        try:
            if budget_s is None:
                deadline = loop.time() + budget
            return await self._poll_in_slot(target, deadline, min(self.config.timeout_s, budget))
        finally:
            self._slots.release()

    async def _poll_in_slot(self, target: Target, deadline: float, timeout: float) -> TargetResult:
        started = time.perf_counter()
        with pollreport.collecting() as report:
            try:
                async with self._deadline(deadline):
                    found = pollreport.keep_finite(pollreport.shorten_labels(await self._walk(target, timeout)))
            except Exception as exc:  # any failure of one target stays with that target
                if isinstance(exc, RedfishError) and exc.layout_changed:
                    self._structure.pop(target.name, None)
                error = "poll deadline exceeded" if isinstance(exc, TimeoutError) and not str(exc) else str(exc)
                if self.closing:
                    error = "exporter shutting down"
                result = TargetResult(False, (), time.perf_counter() - started, f"{type(exc).__name__}: {error}",
                                      report.invalid_readings, report.skipped_members)
            else:
                result = TargetResult(True, found, time.perf_counter() - started, None,
                                      report.invalid_readings, report.skipped_members, len(report.long_labels))
        self._log_left_out(target, report)
        return result

    def _log_left_out(self, target: Target, report: pollreport.PollReport) -> None:
        """A warning when a target starts listing more than is read or sending non-finite readings
        (again after a poll without), not at every poll; the counts are in its metrics."""
        now = (report.skipped_members > 0, report.invalid_readings > 0, bool(report.long_labels))
        before = self._left_out.get(target.name, (False, False, False))
        self._left_out[target.name] = now
        if now[0] and not before[0]:
            log.warning("target lists more members than are read; the rest are skipped", extra=kv(
                target=target.name, skipped=report.skipped_members, cap=MAX_MEMBERS, first=report.first_truncated))
        if now[1] and not before[1]:
            log.warning("target sent readings that are not finite numbers; they are left out", extra=kv(
                target=target.name, invalid=report.invalid_readings))
        if now[2] and not before[2]:
            log.warning("target sent label values past the length limit; they are served shortened", extra=kv(
                target=target.name, labels=len(report.long_labels), limit=pollreport.MAX_LABEL_CHARS,
                first=report.first_long_label))

    async def poll_and_store(self, target: Target) -> None:
        result = await self.poll(target)
        previous = self.results.get(target.name)
        self.results[target.name] = result
        if result.up:
            self.last_success[target.name] = time.time()
            if previous is not None and not previous.up:
                log.info("target recovered", extra=kv(target=target.name))
        elif previous is None or previous.up:  # log a failure once, not every interval
            log.warning("target poll failed", extra=kv(target=target.name, err=result.error))
        else:
            log.debug("target still failing", extra=kv(target=target.name, err=result.error))

    async def poll_all(self) -> None:
        await asyncio.gather(*(self.poll_and_store(t) for t in self.config.targets))

    async def run(self) -> None:
        """Poll forever, one round per interval (a round never overlaps the next)."""
        await every(self.config.interval_s, self.poll_all)

    def target_samples(self, target: Target, result: TargetResult | None) -> Iterable[Sample]:
        yield Sample(m.TARGET_INFO, (target.name, target.kind, target.rack), 1.0)
        if result is None:
            return  # not polled yet: unknown is not down
        yield from result.samples
        yield Sample(m.REDFISH_UP, (target.name,), 1.0 if result.up else 0.0)
        yield Sample(m.REDFISH_POLL_DURATION, (target.name,), result.duration_s)
        # Only where there is something to say: two series more for every target of a large fleet
        # would cost more than they tell.
        if result.invalid_readings:
            yield Sample(m.REDFISH_INVALID_READINGS, (target.name,), float(result.invalid_readings))
        if result.skipped_members:
            yield Sample(m.REDFISH_SKIPPED_MEMBERS, (target.name,), float(result.skipped_members))
        if result.long_labels:
            yield Sample(m.REDFISH_LONG_LABELS, (target.name,), float(result.long_labels))
        if target.name in self.last_success:
            yield Sample(m.REDFISH_LAST_SUCCESS, (target.name,), self.last_success[target.name])

    def samples(self) -> Iterable[Sample]:
        """Everything ``/metrics`` serves: rack budgets and the cached result of every target."""
        for rack, budget in sorted(self.config.rack_budgets().items()):
            yield Sample(m.RACK_BUDGET, (rack,), budget)
        for target in self.config.targets:
            yield from self.target_samples(target, self.results.get(target.name))
