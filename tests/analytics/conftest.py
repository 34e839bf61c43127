"""Fixtures the analytics tests share: ``evaluation``, each simulated scenario evaluated once per session."""
from __future__ import annotations

import pytest

from tests.helpers.evalcache import EvalCache, session_directory


@pytest.fixture(scope="session")
def evaluation(tmp_path_factory) -> EvalCache:
    """``evaluation.evaluate(path)`` is ``evaluate(path)`` of lockstep.analytics.evaluation.evaluate, computed
    once per scenario per session across the xdist workers and handed out as a fresh copy each time
    (tests/helpers/evalcache.py)."""
    return EvalCache(session_directory(tmp_path_factory.getbasetemp()))
