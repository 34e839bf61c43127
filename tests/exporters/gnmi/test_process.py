"""``lockstep switch-exporter`` as a user runs it: its config file naming a fake switch (simulator/gnmi.py,
served over real gRPC with mutual TLS and a password, all read from files), scraped on its /metrics."""
from __future__ import annotations

import json
import urllib.request

import grpc
import pytest
import trustme
import yaml

from lockstep.simulator.gnmi import FakeSwitch, load_recording
from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, value
from tests.helpers.stalled import Process, until

pytestmark = pytest.mark.integration
SECRET = "s3cr3t-Pa55-never-logged"


def test_the_exporter_process_serves_a_switch_it_subscribes_to_over_mutual_tls(tmp_path) -> None:
    ca = trustme.CA()
    server, client = ca.issue_cert("leaf1.fabric.test"), ca.issue_cert("lockstep-switch-exporter")
    creds = grpc.ssl_server_credentials([(server.private_key_pem.bytes(), server.cert_chain_pems[0].bytes())],
                                        root_certificates=ca.cert_pem.bytes(), require_client_auth=True)
    recording = load_recording(json.loads((FIXTURES / "gnmi" / "sonic.json").read_text()))
    switch = FakeSwitch(recording, credentials=("lockstep", SECRET), server_credentials=creds).start()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    (tmp_path / "gnmi.pass").write_text(SECRET + "\n")
    config = {"sample_interval_s": 0.2, "reconnect_max_s": 0.5, "targets": [
        {"name": "leaf1", "address": switch.address, "path_set": "sonic", "username": "lockstep",
         "password_file": str(tmp_path / "gnmi.pass"), "ca_file": str(tmp_path / "ca.pem"),
         "cert_file": str(tmp_path / "client.pem"), "key_file": str(tmp_path / "client.key"),
         "server_name": "leaf1.fabric.test"}]}
    (tmp_path / "switch-exporter.yaml").write_text(yaml.safe_dump(config))
    process = Process(["switch-exporter", f"--config={tmp_path / 'switch-exporter.yaml'}"], tmp_path / "switch.log")
    try:
        def scrape() -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{process.port}/metrics", timeout=10) as answer:
                return parse(answer.read().decode())
        stormed = ("lockstep_switch_pfc_watchdog_stormed", (("port", "Ethernet68"), ("queue", "3"), ("switch", "leaf1")))
        until(lambda: stormed in scrape(), 60, "the switch's watchdog state")
        metrics = scrape()
        assert value(metrics, "lockstep_switch_gnmi_up", switch="leaf1") == 1
        assert metrics[stormed] == 1
        assert value(metrics, "lockstep_switch_pfc_pause_frames_total", switch="leaf1", port="Ethernet68",
                     priority="3", direction="rx") == 1500
        assert value(metrics, "lockstep_switch_target_info", switch="leaf1", address=switch.address, path_set="sonic") == 1
    finally:
        process.stop()
        switch.stop()
    assert SECRET not in process.text()
