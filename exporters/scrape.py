"""Runs every enabled collector once per scrape, isolating failures and timing each one."""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterable, Mapping

from lockstep.exporters.catalog import health
from lockstep.exporters.registry import Collector, NoData
from lockstep.exporters.toolkit.exposition import Encoder, Families, render_families
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.scrape")


class PartialFailure(Exception):
    """Raised by a collector that failed but can still vouch for part of its output (a cache of what
    its source last said): ``samples`` are exposed while the collector's success is 0."""

    def __init__(self, message: str, samples: Iterable[Sample]) -> None:
        super().__init__(message)
        self.samples = list(samples)


class BrokenCollector:
    """Stands in for a collector whose construction failed: it fails every scrape with that error,
    so the failure stays visible in ``lockstep_scrape_collector_success`` instead of killing the agent."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def collect(self) -> Iterable[Sample]:
        raise RuntimeError(f"collector failed to start: {self.error}")


class Scraper:
    def __init__(self, collectors: Mapping[str, Collector], static: Iterable[Sample] = ()) -> None:
        self.collectors = dict(collectors)
        self.static = list(static)
        self.encoder = Encoder()
        self._lock = threading.Lock()  # collectors hold file descriptors; one scrape at a time
        self._failing: dict[str, str] = {}   # collector → the error last logged for it

    def families(self) -> Families:
        families: Families = {}
        with self._lock:
            self.encoder.add(families, self.static)
            for name, collector in self.collectors.items():
                started = time.perf_counter()
                try:
                    # add() is all or nothing: a collector failing halfway leaves no partial output.
                    self.encoder.add(families, collector.collect())
                    success = self._succeeded(name)
                except PartialFailure as exc:
                    self.encoder.add(families, exc.samples)
                    success = self._failed(name, exc)
                except NoData as exc:   # not present: said by the success metric, not an error
                    log.debug("collector has no data", extra=kv(collector=name, reason=str(exc)))
                    success = 0.0
                except Exception as exc:  # one collector must never fail the scrape
                    success = self._failed(name, exc)
                elapsed = time.perf_counter() - started
                self.encoder.add(families, (Sample(health.SCRAPE_COLLECTOR_SUCCESS, (name,), success),
                                            Sample(health.SCRAPE_COLLECTOR_DURATION, (name,), elapsed)))
        return families

    def _failed(self, name: str, exc: Exception) -> float:
        """Log a failure once while it lasts (again when its error changes); the health metric says the rest."""
        error = f"{type(exc).__name__}: {exc}"
        level = logging.DEBUG if self._failing.get(name) == error else logging.ERROR
        log.log(level, "collector failed", extra=kv(collector=name, err=error))
        log.debug("collector traceback", exc_info=True)
        self._failing[name] = error
        return 0.0

    def _succeeded(self, name: str) -> float:
        if self._failing.pop(name, None) is not None:
            log.info("collector recovered", extra=kv(collector=name))
        return 1.0

    def render(self, openmetrics: bool = False) -> str:
        families = self.families()
        return render_families(families, openmetrics)

    def close(self) -> None:
        for name, collector in self.collectors.items():
            close = getattr(collector, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.warning("collector close failed", extra=kv(collector=name), exc_info=True)
