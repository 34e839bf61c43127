"""The collector registry: each collector module registers itself; flags come from here.

Adding a collector means adding a module under ``exporters/collectors/`` (or a package that exposes a
``lockstep.collectors`` entry point, or a module named with ``--collector.extra-module``) that calls
``register``; nothing in the core changes.

Options, one shape for every collector: a frozen ``<Name>Options`` dataclass whose staticmethod
``add_flags(group)`` declares the collector's ``--<name>.*`` flags (passed to ``register``) and whose
classmethod ``from_config(config)`` builds it from the ``ExporterConfig`` (paths and flags), raising
``ValueError`` that names the flag for a bad value (the agent then exits 2 at start). The factory
is ``Collector(<Name>Options.from_config(config))``, plus whatever hardware backend it opens. Flags
are declared with ``add_flag`` and read with ``config.flag(name, default)``.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, runtime_checkable

from lockstep.exporters.toolkit.sample import Sample

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig


def add_flag(group: argparse._ArgumentGroup, name: str, **kwargs: Any) -> None:
    """Declare a collector's flag ``--<name>`` (``name`` dotted: ``pfc.source``), read back with
    ``ExporterConfig.flag(name, default)``. It defaults to None so that a flag not given stays apart
    from any value: the collector applies its default, and ``--sim.node-root`` fills only those."""
    group.add_argument(f"--{name}", dest=name, default=None, **kwargs)


class NoData(Exception):
    """Raised by ``collect`` when what the collector reads is not there at all (no RDMA driver, no
    device): the scrape reports the collector's success as 0 and logs it at debug level, as
    node_exporter does for its ErrNoData."""


@runtime_checkable
class Collector(Protocol):
    """Yields fresh samples of catalog metrics on every scrape. ``close`` is optional."""

    def collect(self) -> Iterable[Sample]: ...


@dataclass(frozen=True)
class CollectorSpec:
    name: str
    factory: Callable[["ExporterConfig"], Collector]
    help: str
    default_enabled: bool = True
    add_flags: Callable[[argparse._ArgumentGroup], None] | None = None


_REGISTRY: dict[str, CollectorSpec] = {}
_loaded = False


def register(name: str, *, help: str, default_enabled: bool = True,
             add_flags: Callable[[argparse._ArgumentGroup], None] | None = None):
    """Decorator for a collector factory ``(config) -> Collector``."""
    def decorate(factory: Callable[["ExporterConfig"], Collector]):
        if name in _REGISTRY and _REGISTRY[name].factory is not factory:
            raise ValueError(f"collector {name!r} registered twice")
        _REGISTRY[name] = CollectorSpec(name, factory, help, default_enabled, add_flags)
        return factory
    return decorate


def load(extra_modules: Iterable[str] = ()) -> dict[str, CollectorSpec]:
    """Import the built-in collector modules, entry-point plugins and ``extra_modules``."""
    global _loaded
    if not _loaded:
        import lockstep.exporters.collectors as builtin
        for module in pkgutil.iter_modules(builtin.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{builtin.__name__}.{module.name}")
        for ep in entry_points(group="lockstep.collectors"):
            ep.load()
        _loaded = True
    for name in extra_modules:
        importlib.import_module(name)
    return dict(sorted(_REGISTRY.items()))
