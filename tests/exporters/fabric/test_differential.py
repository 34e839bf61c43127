"""Differential test: Debian's node_exporter (infiniband collector) and the lockstep exporter read the
same sysfs trees; every value both expose must agree after unit conversion."""
from __future__ import annotations

import pytest

from tests.helpers.node_exporter import assert_agree, scrape_both
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration

SYSFS = FIXTURES / "sysfs"


@pytest.mark.parametrize("tree", ["real", "variants/saturated", "variants/rails"])
def test_every_shared_value_agrees(tree, tmp_path):
    node, ours = scrape_both(SYSFS / tree, tmp_path)
    assert_agree(node, ours, saturated_tree=tree == "variants/saturated")
