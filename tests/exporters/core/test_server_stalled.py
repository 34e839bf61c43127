"""The node agent (a real ``lockstep exporter`` process) against callers that connect and stall: silent
connections, request headers trickled or never finished, a keep-alive connection left idle after its
answer, and more of them than the default open-files limit allows. Each must be closed by the agent
within its timeout while Prometheus' scrapes keep being answered, and running out of descriptors
must not flood the log."""
from __future__ import annotations

import time

import pytest

from tests.helpers.stalled import HEADER, Process, closed_by_peer, connect, get, raise_own_open_files, until

pytestmark = pytest.mark.integration
AGENT = ["exporter", "--collector.disable-defaults"]
MEMORY_LIMIT_KB = 160 * 1024   # the chart's limit for the node agent (the systemd unit's MemoryMax is 200M)


@pytest.fixture
def started(tmp_path):
    processes: list[Process] = []

    def start(*args: str, nofile=None) -> Process:
        processes.append(Process([*AGENT, *args], tmp_path / f"agent{len(processes)}.log", nofile))
        return processes[-1]

    yield start
    for process in processes:
        process.stop()


def test_1100_stalled_connections_are_dropped_within_the_timeout_and_scrapes_answered(started):
    """Before: aiohttp's keep-alive default (an hour) held every connection, and past the soft limit of
    1,024 descriptors (a unit without LimitNOFILE) new scrapes went unanswered."""
    raise_own_open_files(4096)
    agent = started("--web.idle-timeout=2", "--web.read-header-timeout=2", nofile=(1024, 4096))
    assert agent.soft_nofile() == 4096   # lifted to the hard limit at start
    silent = [connect(agent.port) for _ in range(550)]
    trickling = [connect(agent.port, HEADER) for _ in range(550)]
    held = [s for s in silent + trickling if s is not None]
    assert len(held) == 1100
    assert get(agent.port)[0] == 200   # answered while all of them are open
    until(lambda: all(closed_by_peer(s) for s in held), 60, "the agent closes every stalled connection")
    assert get(agent.port)[0] == 200
    assert agent.status("VmHWM") < MEMORY_LIMIT_KB
    for sock in held:
        sock.close()


def test_idle_and_header_timeouts_are_separate(started):
    """A connection sending a header byte by byte is held to the header timeout however it trickles, a
    silent one to the idle timeout; each only to its own."""
    header_only = started("--web.idle-timeout=600", "--web.read-header-timeout=1")
    silent, trickle = connect(header_only.port), connect(header_only.port, b"G")
    sent = [b"ET /metrics HTTP/1.1\r\n"[i:i + 1] for i in range(22)]

    def trickled() -> bool:
        if sent:
            try:
                trickle.send(sent.pop(0))
            except OSError:
                pass
        return closed_by_peer(trickle)

    until(trickled, 30, "a trickled header is cut at the header timeout", every=0.2)
    assert not closed_by_peer(silent)   # connected with it, still inside its idle timeout

    idle_only = started("--web.idle-timeout=1", "--web.read-header-timeout=600")
    silent, partial = connect(idle_only.port), connect(idle_only.port, HEADER)
    until(lambda: closed_by_peer(silent), 30, "a silent connection is closed at the idle timeout")
    assert not closed_by_peer(partial)


def test_a_keep_alive_connection_left_idle_after_its_answer_is_closed(started):
    agent = started("--web.idle-timeout=1")
    sock = connect(agent.port, HEADER + b"\r\n")   # a whole request, keep-alive (HTTP/1.1's default)
    until(lambda: closed_by_peer(sock), 30, "the idle keep-alive connection is closed")


def test_the_default_timeouts_are_a_minute():
    """node_exporter's (exporter-toolkit) and nginx's norm; aiohttp's own default was an hour."""
    from lockstep.exporters.toolkit.conntimeouts import ConnectionTimeouts

    assert ConnectionTimeouts() == ConnectionTimeouts(60.0, 60.0)


def test_out_of_descriptors_logs_a_bounded_number_of_lines(started):
    """Before: asyncio logged each accept() that failed for want of a descriptor, a line for every
    retry. Here the agent's hard limit is too low to lift and 200 callers connect and stall: the first
    failure is logged, then one line per 10 s with the count held back; once the callers are gone
    scrapes are answered again."""
    raise_own_open_files(4096)
    agent = started(nofile=(64, 64))
    held = [s for s in (connect(agent.port, timeout=0.2) for _ in range(200)) if s is not None]
    until(lambda: "out of system resource" in agent.text(), 30, "the agent runs out of descriptors")
    first = time.monotonic()
    until(lambda: time.monotonic() > first + 5 or agent.proc.poll() is not None, 30, "the load: 5 s of it")
    assert agent.proc.poll() is None
    for sock in held:
        sock.close()
    until(lambda: answered(agent.port), 60, "a scrape is answered again")
    lines = agent.text().count("out of system resource")
    assert 1 <= lines <= 2 + (time.monotonic() - first) / 10, f"{lines} lines about accept() failures"


def answered(port: int) -> bool:
    try:
        return get(port, timeout=2)[0] == 200
    except OSError:
        return False
