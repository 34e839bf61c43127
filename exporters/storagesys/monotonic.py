"""Sums one target's per-source counters (MinIO's servers, Ceph RGW's gateways) into series that never go
backwards while the exporter runs.

A plain sum drops when one source restarts (its counters start again at zero) or leaves the answer, and
Prometheus's ``rate()`` reads any drop as a reset of the whole sum: the sum's full value counted again, a false
spike. Here the last value of every (series, source) is kept and only increases are added: a source's value above
its last adds the difference; a value below its last is that source's reset and adds the new value (what it
counted since the restart); a source absent from an answer adds nothing and keeps its last value, so when it comes
back only what it counted meanwhile is added; a source never seen before adds its whole value (the first answer
of a target exports the plain sum). A series is exported while at least one source has it in the answer; the
state of series and sources absent for ``FORGET_AFTER_POLLS`` answers is dropped (checked every
``FORGET_AFTER_POLLS`` answers). Gauges (usage, which MinIO
gives once, from the answering server) are passed through, the last source's value winning."""
from __future__ import annotations

from lockstep.exporters.catalog.model import COUNTER
from lockstep.exporters.toolkit.sample import Sample

# An hour of answers at the default 10 s interval: a bucket deleted, a server gone for good.
FORGET_AFTER_POLLS = 360

_Key = tuple[object, tuple[str, ...]]   # (metric, labels)


class CounterSums:
    """The running sums of one target; ``combine`` is called once per successful poll, never concurrently."""

    def __init__(self) -> None:
        self._polls = 0
        self._last: dict[tuple[_Key, str], tuple[float, int]] = {}   # (series, source) -> (value, poll seen)
        self._total: dict[_Key, tuple[float, int]] = {}              # series -> (exported sum, poll seen)

    def combine(self, sources: dict[str, list[Sample]]) -> list[Sample]:
        self._polls = poll = self._polls + 1
        last, total = self._last, self._total
        out: dict[_Key, Sample] = {}
        for source, samples in sources.items():
            for sample in samples:
                key = (sample.metric, sample.labels)
                if sample.metric.type != COUNTER:
                    out[key] = sample
                    continue
                value = sample.value
                before = last.get((key, source))
                added = value if before is None or value < before[0] else value - before[0]
                last[(key, source)] = (value, poll)
                running = total.get(key)
                summed = (running[0] if running is not None else 0.0) + added
                total[key] = (summed, poll)
                out[key] = Sample(sample.metric, sample.labels, summed)
        if poll % FORGET_AFTER_POLLS == 0:
            self._forget(poll - FORGET_AFTER_POLLS)
        return list(out.values())

    def _forget(self, before: int) -> None:
        self._last = {k: v for k, v in self._last.items() if v[1] > before}
        self._total = {k: v for k, v in self._total.items() if v[1] > before}
