"""Collectors used by the core tests through ``--collector.extra-module``: one that works and one
that raises on every scrape."""
from lockstep.exporters.catalog import gpu
from lockstep.exporters.registry import register
from lockstep.exporters.toolkit.sample import Sample


class _Ok:
    def collect(self):
        yield Sample(gpu.TEMPERATURE, ("0",), 41.0)
        yield Sample(gpu.TEMPERATURE, ("1",), 43.5)


class _Failing:
    def collect(self):
        yield Sample(gpu.TEMPERATURE, ("7",), 99.0)  # must not leak into the scrape
        raise OSError("device went away")


@register("test_ok", help="test collector that works", default_enabled=False)
def ok(config):
    return _Ok()


@register("test_fail", help="test collector that always fails", default_enabled=False)
def failing(config):
    return _Failing()
