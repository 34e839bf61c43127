"""The session's cache of scenario evaluations (tests/helpers/evalcache.py): one evaluation per scenario text
however many callers and workers ask, a fresh copy to each, computed under a lock a second worker waits on."""
from __future__ import annotations

import fcntl

import pytest

from tests.helpers.evalcache import EvalCache, session_directory


class Counting:
    """An evaluator that records each path it is asked for and answers with a mutable result."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, path):
        self.asked.append(path.name)
        return {"scenario": path.stem, "stragglers": [{"node": "node01", "gpu": "0"}]}


def _scenario(folder, name: str, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_each_scenario_text_is_evaluated_once_across_workers_and_each_caller_gets_its_own_copy(tmp_path):
    path = _scenario(tmp_path / "scenarios", "a.yaml", "name: a\n")
    first, second = Counting(), Counting()
    worker1, worker2 = EvalCache(tmp_path / "shared", first), EvalCache(tmp_path / "shared", second)
    got = worker1.evaluate(path)
    got["stragglers"].clear()                       # a test changing what it was handed
    assert worker1.evaluate(path) == worker2.evaluate(path) == {"scenario": "a", "stragglers": [{"node": "node01",
                                                                                                 "gpu": "0"}]}
    assert first.asked == ["a.yaml"] and second.asked == []


def test_a_copy_of_the_file_shares_the_result_and_a_changed_text_is_evaluated_anew(tmp_path):
    evaluator = Counting()
    cache = EvalCache(tmp_path / "shared", evaluator)
    cache.evaluate(_scenario(tmp_path / "one", "a.yaml", "name: a\n"))
    cache.evaluate(_scenario(tmp_path / "two", "a.yaml", "name: a\n"))        # the harness tests' copies
    cache.evaluate(_scenario(tmp_path / "three", "a.yaml", "name: a\nseed: 2\n"))
    assert evaluator.asked == ["a.yaml", "a.yaml"]


def test_the_evaluation_runs_under_a_lock_another_worker_waits_on(tmp_path):
    path = _scenario(tmp_path / "scenarios", "a.yaml", "name: a\n")
    shared = tmp_path / "shared"
    held = []

    def evaluator(p):
        (lock_file,) = shared.glob("a-*.lock")
        with open(lock_file, "w") as other:         # another worker's open of the same lock
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(p.name)
        return "result"

    assert EvalCache(shared, evaluator).evaluate(path) == "result"
    assert held == ["a.yaml"]
    (lock_file,) = shared.glob("a-*.lock")
    with open(lock_file, "w") as other:             # and released once it is stored
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_an_evaluation_that_fails_stores_nothing_and_the_next_caller_tries_again(tmp_path):
    path = _scenario(tmp_path / "scenarios", "a.yaml", "name: a\n")
    shared = tmp_path / "shared"

    def failing(p):
        raise ValueError("bad scenario")

    with pytest.raises(ValueError, match="bad scenario"):
        EvalCache(shared, failing).evaluate(path)
    assert not list(shared.glob("*.pickle")) and not list(shared.glob("*.part"))
    evaluator = Counting()
    assert EvalCache(shared, evaluator).evaluate(path)["scenario"] == "a" and evaluator.asked == ["a.yaml"]


def test_the_workers_of_a_session_share_their_parent_and_a_session_without_workers_its_own(tmp_path, monkeypatch):
    basetemp = tmp_path / "pytest-7" / "popen-gw1"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert session_directory(basetemp) == tmp_path / "pytest-7" / "evaluations"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert session_directory(basetemp) == basetemp / "evaluations"
