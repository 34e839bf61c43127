"""Shared test plumbing: golden files, fixture paths, and real Prometheus-stack processes."""
from __future__ import annotations

import difflib
import socket
from pathlib import Path

import pytest

from lockstep import stack as _stack

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
REPO = TESTS.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files from the current output (review the diff before committing)")


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(path, text)``: compare ``text`` with the reviewed file at ``tests/golden/<path>``."""
    update = request.config.getoption("--update-golden")

    def check(relpath: str, text: str) -> None:
        path = TESTS / "golden" / relpath
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


def write_server_tls(directory: Path):
    """A fresh CA (``ca.crt``) and a certificate it signed for 127.0.0.1 and localhost (``server.crt``,
    ``server.key``) under ``directory``; returns the CA (a ``trustme.CA``) to sign more."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(directory / "server.crt")
    cert.private_key_pem.write_to_path(directory / "server.key")
    ca.cert_pem.write_to_path(directory / "ca.crt")
    return ca


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
