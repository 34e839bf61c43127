"""lockstep.stack: port checks as the servers see them."""
import socket

from lockstep.stack import free_port, port_in_use


def test_a_listening_port_is_in_use_and_a_closed_one_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


def test_time_wait_connections_of_a_stopped_server_do_not_block_a_restart():
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    conn.close()      # the server closes first: its side of the connection goes to TIME_WAIT
    client.close()
    server.close()
    assert not port_in_use(port)
