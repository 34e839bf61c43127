"""lockstep.stack: port checks as the servers see them, and starting a real server on a free port."""
import json
import socket
from pathlib import Path

import pytest

from lockstep import stack as stack_module
from lockstep.stack import http_get, port_in_use, reload_prometheus, start_alertmanager, start_prometheus

AM_CONFIG = {"route": {"receiver": "none"}, "receivers": [{"name": "none"}]}


@pytest.fixture
def taken_port():
    """A port some other process listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_a_listening_port_is_in_use_and_a_closed_one_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


def test_time_wait_connections_of_a_stopped_server_do_not_block_a_restart():
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()      # the server closes first: its side of the connection goes to TIME_WAIT
    client.close()
    server.close()
    assert not port_in_use(port)


@pytest.mark.integration
def test_a_free_port_taken_before_the_server_binds_it_is_replaced_by_another(taken_port, stack, tmp_path: Path,
                                                                             monkeypatch):
    """The race every ephemeral-port start runs: the port was free when picked, another process bound it
    before the server did. The real Alertmanager fails to bind, and the start is tried on a new port."""
    picks = iter([taken_port])
    real_free_port = stack_module.free_port
    monkeypatch.setattr(stack_module, "free_port", lambda host="127.0.0.1": next(picks, None) or real_free_port())
    am = stack.add(start_alertmanager(AM_CONFIG, tmp_path / "am"))
    assert am.alive() and not am.url.endswith(f":{taken_port}")
    assert "address already in use" in am.log_path.read_text()  # the first attempt did meet the taken port


@pytest.mark.integration
def test_a_port_given_by_the_caller_is_not_swapped_for_another(taken_port, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="address already in use"):
        start_alertmanager(AM_CONFIG, tmp_path / "am", port=taken_port)


@pytest.mark.integration
def test_a_reload_applies_the_new_config_or_says_why_prometheus_refused_it(stack, tmp_path: Path) -> None:
    """How a target known only once it has bound (the analytics service) joins a running Prometheus."""
    prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}}, tmp_path / "prom"))
    job = {"job_name": "added", "static_configs": [{"targets": ["127.0.0.1:9"]}]}
    reload_prometheus(prom, {"global": {"scrape_interval": "15s"}, "scrape_configs": [job]})
    assert "job_name: added" in json.loads(http_get(prom.url + "/api/v1/status/config")[1])["data"]["yaml"]
    with pytest.raises(RuntimeError, match="refused its new config.*not a valid duration string: \"soon\""):
        reload_prometheus(prom, {"global": {"scrape_interval": "soon"}})
    assert prom.alive() and "job_name: added" in http_get(prom.url + "/api/v1/status/config")[1].decode()
