"""Fixtures the tests of several folders share: golden files, real Prometheus-stack processes, a refused
port, the analytics service's test run. A folder's own fixtures live in its conftest.py; plain helpers
live in tests/helpers/.

And the guard of the ``integration`` marker: a test without it may start no process
(tests/helpers/processes.py), so ``make test-fast`` (``-m "not integration"``) never waits on one."""
from __future__ import annotations

import difflib
import importlib
import socket
from pathlib import Path

import pytest

from lockstep import stack as _stack
from tests.helpers.longfirst import longest_first
from tests.helpers.paths import GOLDEN, REPO
from tests.helpers.processes import processes_refused


def pytest_sessionstart(session: pytest.Session) -> None:
    """What a library runs to probe the machine, once per process or until it has a cache, runs here before
    the first test, so the guard blames no test for it: joblib counts the physical cores with ``lscpu``
    the first time scikit-learn fits a model (the imbalance scorer's GaussianMixture), and matplotlib
    asks ``fc-list`` for the system's fonts while it has no font cache (the report's plots)."""
    from joblib import cpu_count

    importlib.import_module("matplotlib.font_manager")   # builds the font cache on import
    cpu_count(only_physical_cores=True)


def _guarded(item: pytest.Item, phase: str):
    """A hook wrapper's body: the phase runs with processes refused unless the test is marked integration."""
    if item.get_closest_marker("integration") is not None:
        return (yield)
    with processes_refused(item.nodeid) as started:
        try:
            result = yield
        except BaseException:
            if started:
                pytest.fail(_refusal(item, phase, started), pytrace=False)
            raise
    if started:
        pytest.fail(_refusal(item, phase, started), pytrace=False)
    return result


def _refusal(item: pytest.Item, phase: str, started: list[str]) -> str:
    return (f"{item.nodeid} started a process in its {phase} ({', '.join(started)}) but is not marked "
            "integration: mark it (pytestmark = pytest.mark.integration, or @pytest.mark.integration) "
            "so that `make test-fast` leaves it out")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _guarded(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    return (yield from _guarded(item, "teardown"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first (tests/helpers/longfirst.py)."""
    longest_first(items)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files from the current output (review the diff before committing)")


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(path, text)``: compare ``text`` with the reviewed file at ``tests/golden/<path>``."""
    update = request.config.getoption("--update-golden")

    def check(relpath: str, text: str) -> None:
        path = GOLDEN / relpath
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"golden file {path.relative_to(REPO)} missing; run pytest --update-golden and review it")
        expected = path.read_text()
        if text != expected:
            diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                                "golden", "actual", n=2))
            pytest.fail(f"output differs from {path.relative_to(REPO)}:\n{diff[:6000]}")

    return check


@pytest.fixture
def stack(tmp_path: Path):
    """A ``lockstep.stack.Stack`` whose processes are stopped after the test."""
    with _stack.Stack() as s:
        yield s


@pytest.fixture
def refused_port():
    """A port where connections are refused for the whole test: bound here, never listened on (a free
    port could be taken by another process and answer)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(autouse=True)
def _root_logging_restored():
    """A command run in-process (``lockstep.cli.main``) sets up logging as a process would: it replaces
    the root logger's handlers with one on the stderr of the moment, which in a test is pytest's capture,
    closed when the test ends. Put back what was there so the next test's log lines go to pytest."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture(scope="session")
def service_sim():
    """The analytics service's test run (tests/helpers/analytics_service.py), simulated in process once for the
    modules that read it (none changes it)."""
    from lockstep.analytics.evaluation.evaluate import simulate
    from tests.helpers.analytics_service import SCENARIO

    return simulate(SCENARIO)


@pytest.fixture(scope="module")
def service_datadir(service_sim, tmp_path_factory):
    """TSDB blocks of the service's test run, plus one job_info series on a node outside the job whose
    job_id is a PromQL injection attempt."""
    from tests.helpers.analytics_service import backfill_with_evil_job

    workdir = tmp_path_factory.mktemp("prom")
    backfill_with_evil_job(service_sim, workdir)
    return workdir
