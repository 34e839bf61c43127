"""The subscriber against fake switches over real gRPC (in-process servers, simulator/gnmi.py): both path
sets arrive as metrics, a restarted switch is subscribed again, a dead switch never blanks another, and
credentials never reach the logs; TLS verifies the switch (by CA and name) and mutual TLS presents the
client's certificate (trustme's CAs)."""
from __future__ import annotations

import json
import logging
import socket
import time

import grpc
import pytest

from lockstep.exporters.catalog import gnmi as gm
from lockstep.exporters.gnmi.config import Credentials, Neighbor, SwitchConfig, Target, Tls
from lockstep.exporters.gnmi.subscriber import Subscriber, SwitchState
from lockstep.exporters.third_party.gnmi import gnmi_pb2
from lockstep.exporters.toolkit.sample import Sample
from lockstep.simulator.gnmi import FakeSwitch, Recording, load_recording
from tests.helpers.paths import FIXTURES

INTERVAL_S = 0.05
SECRET = "s3cr3t-Pa55-never-logged"


def recording(name: str):
    return load_recording(json.loads((FIXTURES / "gnmi" / f"{name}.json").read_text()))


def until(condition, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.02)
    raise AssertionError(f"condition not met in {timeout_s} s")


def values(subscriber: Subscriber) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in subscriber.samples()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def switches():
    started: list[FakeSwitch] = []

    def start(name: str, **kwargs) -> FakeSwitch:
        switch = FakeSwitch(recording(name), **kwargs).start()
        started.append(switch)
        return switch

    yield start
    for switch in started:
        switch.stop()


@pytest.fixture
def subscriber_of():
    made: list[Subscriber] = []

    def make(*targets: Target) -> Subscriber:
        subscriber = Subscriber(SwitchConfig(targets, reconnect_max_s=0.2))
        subscriber.start()
        made.append(subscriber)
        return subscriber

    yield make
    for subscriber in made:
        subscriber.stop()


def test_both_path_sets_over_grpc(switches, subscriber_of) -> None:
    sonic, cumulus = switches("sonic"), switches("cumulus")
    sub = subscriber_of(Target("leaf1", sonic.address, "sonic", INTERVAL_S),
                        Target("leaf2", cumulus.address, "cumulus", INTERVAL_S))
    got = until(lambda: (v := values(sub)) and v[("lockstep_switch_gnmi_up", ("leaf1",))] == 1
                and v[("lockstep_switch_gnmi_up", ("leaf2",))] == 1 and v)
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "3", "rx"))] == 1500
    assert got[("lockstep_switch_pfc_watchdog_stormed", ("leaf1", "Ethernet68", "3"))] == 1
    assert got[("lockstep_switch_pfc_pause_duration_seconds_total", ("leaf2", "swp1", "3", "rx"))] == 0.48
    assert got[("lockstep_switch_queue_ecn_marked_packets_total", ("leaf2", "swp1", "3"))] == 4410
    assert got[("lockstep_switch_gnmi_errors_total", ("leaf1", "decode"))] == 0
    assert got[("lockstep_switch_target_info", ("leaf2", cumulus.address, "cumulus"))] == 1


def test_reconnects_after_the_switch_restarts(switches, subscriber_of) -> None:
    switch = switches("cumulus")
    sub = subscriber_of(Target("leaf2", switch.address, "cumulus", INTERVAL_S))
    until(lambda: values(sub)[("lockstep_switch_gnmi_up", ("leaf2",))] == 1)
    switch.stop()
    until(lambda: values(sub)[("lockstep_switch_gnmi_up", ("leaf2",))] == 0)
    assert values(sub)[("lockstep_switch_gnmi_errors_total", ("leaf2", "rpc"))] >= 1
    changed = recording("cumulus")
    changed.updates[4].val.uint_val = 5000  # ecn-marked-pkts of swp1 queue 3 moved on while it was away
    switch.replace(changed)
    switch.start()  # the same port
    key = ("lockstep_switch_queue_ecn_marked_packets_total", ("leaf2", "swp1", "3"))
    until(lambda: values(sub).get(key) == 5000)
    assert values(sub)[("lockstep_switch_gnmi_up", ("leaf2",))] == 1


def test_a_dead_switch_never_blanks_another(switches, subscriber_of) -> None:
    alive = switches("sonic")
    sub = subscriber_of(Target("dead", f"127.0.0.1:{free_port()}", "cumulus", INTERVAL_S),
                        Target("leaf1", alive.address, "sonic", INTERVAL_S))
    until(lambda: values(sub)[("lockstep_switch_gnmi_errors_total", ("dead", "rpc"))] >= 2)
    got = until(lambda: (v := values(sub))[("lockstep_switch_gnmi_up", ("leaf1",))] == 1 and v)
    assert got[("lockstep_switch_gnmi_up", ("dead",))] == 0
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "7", "rx"))] == 2
    assert not any(labels[0] == "dead" for name, labels in got if name.startswith("lockstep_switch_pfc"))


def test_an_update_the_decoder_cannot_place_loses_itself_not_the_subscription(switches, subscriber_of) -> None:
    """One port's counters with an empty path (no port to name them by): counted as a decode error, and the
    switch's other updates still arrive, notification after notification."""
    good = recording("sonic")
    bad = gnmi_pb2.Update(path=gnmi_pb2.Path(),
                          val=gnmi_pb2.TypedValue(json_ietf_val=b'{"SAI_PORT_STAT_PFC_3_RX_PKTS": "5"}'))
    switch = switches("sonic")
    switch.replace(Recording(good.prefix_target, [bad, *good.updates]))
    sub = subscriber_of(Target("leaf1", switch.address, "sonic", INTERVAL_S))
    got = until(lambda: (v := values(sub))[("lockstep_switch_gnmi_errors_total", ("leaf1", "decode"))] >= 2 and v)
    assert got[("lockstep_switch_gnmi_up", ("leaf1",))] == 1
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "3", "rx"))] == 1500
    assert got[("lockstep_switch_gnmi_errors_total", ("leaf1", "rpc"))] == 0


def test_the_neighbors_map_is_served_with_the_switch_even_while_it_is_down() -> None:
    host, spine = Neighbor(node="node00", interface="eth2"), Neighbor(switch="spine1", port="Ethernet0")
    target = Target("leaf1", "127.0.0.1:1", "sonic", INTERVAL_S, neighbors=(("Ethernet0", host), ("Ethernet64", spine)))
    got = {s.labels: s.value for s in Subscriber(SwitchConfig((target,))).samples()
           if s.metric.name == "lockstep_switch_port_neighbor_info"}
    assert got == {("leaf1", "Ethernet0", "node00", "eth2", "", ""): 1.0,
                   ("leaf1", "Ethernet64", "", "", "spine1", "Ethernet0"): 1.0}


def test_a_value_the_switch_stopped_sending_is_served_no_longer() -> None:
    """A SAMPLE subscription resends every path each interval: a series not sent for three intervals (30 s at
    least) goes absent, so a dead switch's counters do not stand frozen (a storm that looks over) and its
    last watchdog state does not stay on; one still sent stays, and so does the switch's health."""
    now = [1000.0]
    state = SwitchState(Target("leaf1", "127.0.0.1:1", "sonic", 20.0), clock=lambda: now[0])
    pause = Sample(gm.PAUSE_FRAMES, ("leaf1", "Ethernet68", "3", "rx"), 1500.0)
    stormed = Sample(gm.WATCHDOG_STORMED, ("leaf1", "Ethernet68", "3"), 1.0)
    state.keep([pause, stormed])

    def served() -> set[str]:
        return {s.metric.name for s in state.samples()}

    now[0] += 59.0                   # three intervals of 20 s not yet over: both still served
    assert {gm.PAUSE_FRAMES.name, gm.WATCHDOG_STORMED.name} <= served()
    state.keep([pause])              # the counter sent again, the watchdog state not
    now[0] += 2.0
    assert gm.PAUSE_FRAMES.name in served() and gm.WATCHDOG_STORMED.name not in served()
    now[0] += 60.0
    assert served() == {gm.TARGET_INFO.name, gm.UP.name, gm.UPDATES.name, gm.ERRORS.name}
    fast = SwitchState(Target("leaf2", "127.0.0.1:1", "sonic", 1.0), clock=lambda: now[0])
    assert fast.stale_after_s == 30.0   # never sooner than 30 s, however short the interval asked


def test_credentials_are_sent_and_never_logged(switches, subscriber_of, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    good = switches("cumulus", credentials=("lockstep", SECRET))
    refusing = switches("sonic", credentials=("lockstep", "another"))
    creds = Credentials("lockstep", SECRET)
    sub = subscriber_of(Target("leaf2", good.address, "cumulus", INTERVAL_S, creds),
                        Target("leaf1", refusing.address, "sonic", INTERVAL_S, creds))
    until(lambda: values(sub)[("lockstep_switch_gnmi_up", ("leaf2",))] == 1)
    until(lambda: values(sub)[("lockstep_switch_gnmi_errors_total", ("leaf1", "rpc"))] >= 1)
    assert values(sub)[("lockstep_switch_gnmi_up", ("leaf1",))] == 0
    refusals = [r.fields for r in caplog.records if getattr(r, "fields", {}).get("switch") == "leaf1"]
    assert any(f.get("code") == "UNAUTHENTICATED" for f in refusals)  # the refusal was logged ...
    logged = caplog.text + "".join(repr(r.__dict__) for r in caplog.records)
    assert SECRET not in logged  # ... without the password
    assert SECRET not in repr(sub.config)


@pytest.fixture(scope="module")
def pki():
    """A CA (trustme) and, signed by it, the switch's certificate (for its name and 127.0.0.1) and a
    client's; a second CA that signed neither."""
    import trustme
    ca, stranger = trustme.CA(), trustme.CA()
    server = ca.issue_cert("leaf1.fabric.test", "127.0.0.1")
    client = ca.issue_cert("lockstep-switch-exporter")
    return ca, stranger, server, client


def tls_server(server, ca=None) -> grpc.ServerCredentials:
    key, chain = server.private_key_pem.bytes(), b"".join(b.bytes() for b in server.cert_chain_pems)
    if ca is None:
        return grpc.ssl_server_credentials([(key, chain)])
    return grpc.ssl_server_credentials([(key, chain)], root_certificates=ca.cert_pem.bytes(), require_client_auth=True)


def client_tls(ca, client=None, server_name=None) -> Tls:
    if client is None:
        return Tls(ca.cert_pem.bytes(), server_name=server_name)
    return Tls(ca.cert_pem.bytes(), b"".join(b.bytes() for b in client.cert_chain_pems),
               client.private_key_pem.bytes(), server_name)


def test_tls_verifies_the_switch_by_its_ca_and_name(switches, subscriber_of, pki) -> None:
    ca, stranger, server, _ = pki
    switch = switches("sonic", server_credentials=tls_server(server))
    tls = {"leaf1": client_tls(ca), "named": client_tls(ca, server_name="leaf1.fabric.test"),
           "untrusted": client_tls(stranger), "misnamed": client_tls(ca, server_name="leaf9.fabric.test"), "plain": None}
    sub = subscriber_of(*(Target(name, switch.address, "sonic", INTERVAL_S, tls=t) for name, t in tls.items()))
    got = until(lambda: (v := values(sub)) and v[("lockstep_switch_gnmi_up", ("leaf1",))] == 1
                and v[("lockstep_switch_gnmi_up", ("named",))] == 1 and v)
    assert got[("lockstep_switch_pfc_pause_frames_total", ("leaf1", "Ethernet68", "3", "rx"))] == 1500
    for refused in ("untrusted", "misnamed", "plain"):   # a CA it does not trust, another name, no TLS at all
        until(lambda name=refused: values(sub)[("lockstep_switch_gnmi_errors_total", (name, "rpc"))] >= 1)
        assert values(sub)[("lockstep_switch_gnmi_up", (refused,))] == 0
        assert not [k for k in values(sub) if k[0].startswith("lockstep_switch_pfc") and k[1][0] == refused]


def test_mutual_tls_sends_the_client_certificate(switches, subscriber_of, pki) -> None:
    ca, stranger, server, client = pki
    outsider = stranger.issue_cert("someone-else")
    switch = switches("cumulus", server_credentials=tls_server(server, ca), credentials=("lockstep", SECRET))
    creds = Credentials("lockstep", SECRET)
    sub = subscriber_of(Target("leaf2", switch.address, "cumulus", INTERVAL_S, creds, client_tls(ca, client)),
                        Target("anonymous", switch.address, "cumulus", INTERVAL_S, creds, client_tls(ca)),
                        Target("outsider", switch.address, "cumulus", INTERVAL_S, creds, client_tls(ca, outsider)))
    got = until(lambda: (v := values(sub)) and v[("lockstep_switch_gnmi_up", ("leaf2",))] == 1 and v)
    assert got[("lockstep_switch_queue_ecn_marked_packets_total", ("leaf2", "swp1", "3"))] == 4410
    for refused in ("anonymous", "outsider"):   # no client certificate; one the switch's CA did not sign
        until(lambda name=refused: values(sub)[("lockstep_switch_gnmi_errors_total", (name, "rpc"))] >= 1)
        assert values(sub)[("lockstep_switch_gnmi_up", (refused,))] == 0
