"""Runs every enabled collector once per scrape, isolating failures and timing each one."""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterable, Mapping

from exporters.catalog import health
from exporters.exposition import Encoder, Families, render_families
from exporters.logs import kv
from exporters.registry import Collector
from exporters.sample import Sample

log = logging.getLogger("lockstep.scrape")


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

    def families(self) -> Families:
        families: Families = {}
        with self._lock:
            self.encoder.add(families, self.static)
            for name, collector in self.collectors.items():
                started = time.perf_counter()
                try:
                    # add() is all or nothing: a collector failing halfway leaves no partial output.
                    self.encoder.add(families, collector.collect())
                    success = 1.0
                except Exception as exc:  # one collector must never fail the scrape
                    log.error("collector failed", extra=kv(collector=name, err=f"{type(exc).__name__}: {exc}"))
                    log.debug("collector traceback", exc_info=True)
                    success = 0.0
                elapsed = time.perf_counter() - started
                self.encoder.add(families, (Sample(health.SCRAPE_COLLECTOR_SUCCESS, (name,), success),
                                            Sample(health.SCRAPE_COLLECTOR_DURATION, (name,), elapsed)))
        return families

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
