"""The order ``make test`` hands modules to its workers: the modules marked ``long(seconds)`` first, the longest
first, then the rest in collection order (tests/README.md, "The `long` marker")."""
from __future__ import annotations

import pytest


def long_seconds(item: pytest.Item) -> float:
    """The seconds of the item's ``long`` marker (its module's), 0 without one."""
    mark = item.get_closest_marker("long")
    if mark is None:
        return 0.0
    if len(mark.args) != 1 or isinstance(mark.args[0], bool) or not isinstance(mark.args[0], (int, float)) \
            or not mark.args[0] > 0:
        raise pytest.UsageError(f"{item.nodeid}: pytest.mark.long takes one argument, the module's seconds "
                                f"on two cores (a positive number), not {mark.args!r}")
    return float(mark.args[0])


def longest_first(items: list[pytest.Item]) -> None:
    """Sorts ``items`` in place: a module's items stay together and in their order, the modules by the largest
    ``long`` seconds among their items, longest first; unmarked modules keep their collection order, after."""
    seconds: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        seconds[module] = max(seconds.get(module, 0.0), long_seconds(item))
    items.sort(key=lambda item: -seconds[item.nodeid.split("::", 1)[0]])   # stable
