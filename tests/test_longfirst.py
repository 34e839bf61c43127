"""The order make test hands modules to its workers (tests/helpers/longfirst.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.helpers.longfirst import longest_first


@dataclass
class Item:
    nodeid: str
    marks: dict = field(default_factory=dict)

    def get_closest_marker(self, name: str):
        return self.marks.get(name)


def test_long_modules_come_first_longest_first_and_the_rest_keep_their_order():
    items = [Item("a.py::t1"), Item("b.py::t1", {"long": pytest.mark.long(30).mark}), Item("a.py::t2"),
             Item("c.py::t1", {"long": pytest.mark.long(240).mark}), Item("c.py::t2", {"long": pytest.mark.long(240).mark}),
             Item("d.py::t1"), Item("b.py::t2", {"long": pytest.mark.long(30).mark})]
    longest_first(items)
    assert [i.nodeid for i in items] == ["c.py::t1", "c.py::t2", "b.py::t1", "b.py::t2", "a.py::t1", "a.py::t2",
                                         "d.py::t1"]


@pytest.mark.parametrize("args", [(), (0,), (-5,), ("90",), (True,), (30, 60)])
def test_a_long_marker_without_its_seconds_is_a_usage_error(args):
    with pytest.raises(pytest.UsageError, match="pytest.mark.long takes one argument"):
        longest_first([Item("a.py::t1", {"long": pytest.mark.long(*args).mark if args else pytest.mark.long.mark})])
