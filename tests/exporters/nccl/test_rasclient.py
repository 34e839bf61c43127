"""The RAS protocol client against the simulated RAS service over real TCP on 127.0.0.1: format detected by
asking (JSON from NCCL 2.28.7, text before), the simulated answers parsed, and every way of not answering."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from lockstep.exporters.nccl.ras import parse
from lockstep.exporters.nccl.rasclient import (
    RasAnswer,
    RasClient,
    RasProtocolError,
    RasRefused,
    RasTimeout,
    query,
)
from lockstep.simulator.ncclras import RasJob, RasService, render_json, render_text


def job() -> RasJob:
    j = RasJob(["10.0.0.1", "10.0.0.2"], gpus_per_node=4)
    j.advance(10)
    return j


def ask(service: RasService, **kwargs) -> RasAnswer:
    return query(service.host, service.port, timeout=10, **kwargs)


@pytest.mark.parametrize("version,fmt", [("2.30.7", "json"), ("2.29.2", "json"), ("2.28.9", "json"),
                                         ("2.28.7", "json"), ("2.28.3", "text"), ("2.26.2", "text")])
def test_the_format_is_detected_by_asking(version, fmt):
    with RasService(job(), version) as service:
        answer = ask(service)
    assert (answer.format, answer.protocol) == (fmt, 2)
    status = parse(answer.body, answer.format)
    assert status.nccl_version == version and status.format == fmt


def test_text_on_request_and_json_refused_by_an_old_nccl():
    with RasService(job(), "2.30.7") as new, RasService(job(), "2.26.2") as old:
        assert ask(new, fmt="text").format == "text"
        with pytest.raises(RasProtocolError, match="SET FORMAT json refused"):
            ask(old, fmt="json")


def test_the_json_answer_is_the_simulators_and_carries_every_rank():
    j = job()
    j.kill(2)
    with RasService(j, "2.28.9") as service:
        answer = ask(service)
    assert answer.body.count('"nvml_dev": 2\n') == 2            # 2.28.9's missing comma, in both communicators
    status = parse(answer.body, "json")
    world = max(status.communicators, key=lambda c: c.size)
    assert (world.size, world.ranks_count, world.missing_count) == (8, 7, 1)
    assert [(m.rank, m.host) for m in world.missing] == [(2, "10.0.0.1")]


def test_a_verbose_text_answer_names_more_outliers():
    j = RasJob(["10.0.0.1", "10.0.0.2"], gpus_per_node=4, lead=1)
    j.advance(10)
    for rank in (1, 2, 5):     # 3 of 8 behind: over a quarter, under half
        j.stop_entering(rank)
    j.advance(2)
    terse, verbose = render_text(j, "2.26.2", verbose=False), render_text(j, "2.26.2", verbose=True)
    assert "  3 ranks have launched up to operation 40\n" in terse and "  Rank 1 -- GPU" not in terse
    assert "  Rank 1 -- GPU 1 managed by process 100001 on node 10.0.0.1\n" in verbose
    with RasService(j, "2.26.2") as service:
        assert ask(service).body == verbose
        assert ask(service, verbose=False).body == terse


def test_nothing_listening_is_refused(refused_port):
    with pytest.raises(RasRefused):
        query("127.0.0.1", refused_port, timeout=5)


@pytest.fixture
def silent_listener():
    """A listener that accepts connections and never answers; yields (port, accepted connections)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except socket.timeout:
                continue
            except OSError:
                return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    server.close()
    for conn in accepted:
        conn.close()


def test_a_listener_that_never_answers_times_out(silent_listener):
    port, accepted = silent_listener
    with pytest.raises(RasTimeout):
        query("127.0.0.1", port, timeout=0.5)
    assert accepted


def test_an_answer_over_the_limit_is_refused():
    j = RasJob([f"10.0.0.{n}" for n in range(1, 9)], gpus_per_node=8)
    with RasService(j) as service:
        with pytest.raises(RasProtocolError, match="larger than"):
            ask(service, max_bytes=4096)


def test_a_server_that_is_not_ras_is_a_protocol_error():
    server = socket.create_server(("127.0.0.1", 0))

    def run():
        conn, _ = server.accept()
        conn.recv(100)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=run, daemon=True).start()
    try:
        with pytest.raises(RasProtocolError, match="handshake"):
            query("127.0.0.1", server.getsockname()[1], timeout=5)
    finally:
        server.close()


def test_the_service_answers_commands_as_nccl_does():
    with RasService(job(), "2.26.2") as old, RasService(job(), "2.30.7") as new:
        assert exchange(old, "client protocol 7", "TIMEOUT x", "SET FORMAT json", "MONITOR", "BOGUS") == [
            "SERVER PROTOCOL 2", "ERROR: Invalid timeout value x", "ERROR: Unknown command SET FORMAT json",
            "ERROR: Unknown command MONITOR", "ERROR: Unknown command BOGUS"]
        assert exchange(new, "SET FORMAT yaml", "set format JSON", "MONITOR nope") == [
            "ERROR: Invalid format yaml", "OK", "ERROR: Invalid event group 'nope'"]


def exchange(service: RasService, *commands: str) -> list[str]:
    with socket.create_connection((service.host, service.port), timeout=5) as conn:
        reader = conn.makefile("rb")
        replies = []
        for command in commands:
            conn.sendall(command.encode() + b"\r\n")
            replies.append(reader.readline().decode().rstrip("\n"))
        return replies


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_monitor_mode_reports_a_peer_declared_dead(fmt):
    j = job()
    with RasService(j, "2.29.2") as service:
        with socket.create_connection((service.host, service.port), timeout=5) as conn:
            reader = conn.makefile("rb")
            if fmt == "json":
                conn.sendall(b"SET FORMAT json\n")
                assert reader.readline() == b"OK\n"
            conn.sendall(b"MONITOR lifecycle\n")
            assert reader.readline() == b"OK\n"
            deadline = time.monotonic() + 5
            while not service.monitors and time.monotonic() < deadline:
                time.sleep(0.02)
            j.declare_dead(5)
            event = reader.readline().decode() if fmt == "text" else b"".join(
                iter(lambda: reader.readline(), b"}\n")).decode()
    if fmt == "text":
        assert event.endswith("] PEER_DEAD: Process 101001 on node 10.0.0.2 managing GPU 1 \n")
    else:
        assert '"event": "PEER_DEAD"' in event and '"host": "10.0.0.2"' in event and '"pid": 101001' in event


def test_the_job_freezes_as_a_synchronous_job_does():
    j = RasJob(["10.0.0.1"], gpus_per_node=4, node_comms=False, lead=1)
    world = j.comms[0]
    j.advance(10)
    j.stop_entering(2)
    j.advance(5)
    counts = {r: j.counts(world, r)["AllReduce"] for r in range(4)}
    assert counts == {0: 44, 1: 44, 2: 40, 3: 44}     # 4 per step; the others one step ahead, then waiting
    j.advance(5)
    assert {r: j.counts(world, r)["AllReduce"] for r in range(4)} == counts
    assert render_json(j).count('"AllReduce": 40') == 1


def test_after_a_json_answer_the_next_poll_sends_its_commands_in_one_write():
    """A server that reads all four commands before it answers any: only a client that does not wait for each
    reply gets through it (RAS reads every complete line in its buffer in turn)."""
    body = render_json(job(), "2.30.7")
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def run():
        server.settimeout(5)
        conn, _ = server.accept()      # one poll, one connection
        with conn:
            data = b""
            while data.count(b"\n") < 4:
                chunk = conn.recv(1024)
                if not chunk:
                    break
                data += chunk
            seen.append(data)
            conn.sendall(b"SERVER PROTOCOL 2\nOK\nOK\n" + body.encode())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    client = RasClient("127.0.0.1", server.getsockname()[1], timeout=2)
    try:
        with RasService(job(), "2.30.7") as real:     # the first poll asks step by step: learn JSON from a real one
            first = RasClient(real.host, real.port, timeout=10)
            assert first.query().format == "json" and first.json_known
        client.json_known = True
        answer = client.query()
        thread.join(5)
    finally:
        server.close()
    assert answer.format == "json" and parse(answer.body, "json").nccl_version == "2.30.7"
    assert seen[0] == b"CLIENT PROTOCOL 2\nTIMEOUT 1\nSET FORMAT json\nSTATUS\n"


def test_a_server_that_went_back_to_text_is_read_as_text_then_asked_step_by_step():
    """A JSON poll's commands sent at once to a NCCL that no longer knows SET FORMAT: its terse text status is
    read as text, and the next poll asks step by step again (for the verbose one)."""
    j = job()
    with RasService(j, "2.30.7") as service:
        client = RasClient(service.host, service.port, timeout=10)
        assert client.query().format == "json"
        service.version = "2.26.2"       # a job of an older NCCL now holds the address
        terse = client.query()
        assert (terse.format, terse.body) == ("text", render_text(j, "2.26.2", verbose=False))
        assert not client.json_known
        assert client.query().body == render_text(j, "2.26.2", verbose=True)


def test_the_address_is_resolved_once_and_again_after_a_failure(monkeypatch):
    calls = []
    real = socket.getaddrinfo

    def counting(*args, **kwargs):
        calls.append(args[:2])
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    with RasService(job(), "2.30.7") as service:
        client = RasClient("localhost", service.port, timeout=10)
        for _ in range(3):
            assert client.query().format == "json"
        assert calls == [("localhost", service.port)]
    with pytest.raises(RasRefused):     # the job ended: the address held is refused...
        client.query()
    assert len(calls) == 1
    with pytest.raises(RasRefused):     # ...and resolved again for the next poll
        client.query()
    assert len(calls) == 2
