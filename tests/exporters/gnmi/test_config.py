"""The switch exporter's config: a broken file names file, line and key; secrets come from files, never repr'd."""
from __future__ import annotations

import pytest

from lockstep.exporters.gnmi.config import load_config
from lockstep.exporters.toolkit.configfile import ConfigError

GOOD = """sample_interval_s: 5
targets:
  - name: leaf1
    address: 10.0.0.1:8080
    path_set: sonic
    username: admin
    password_file: pw
  - name: leaf2
    address: leaf2.example:9339
    path_set: cumulus
    sample_interval_s: 2
    ca_file: ca.pem
"""


def write(tmp_path, text: str):
    (tmp_path / "pw").write_text("hunter2\n")
    (tmp_path / "ca.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    path = tmp_path / "switches.yaml"
    path.write_text(text)
    return path


def test_a_good_config(tmp_path) -> None:
    config = load_config(write(tmp_path, GOOD))
    leaf1, leaf2 = config.targets
    assert (leaf1.path_set, leaf1.sample_interval_s, leaf1.credentials.password) == ("sonic", 5.0, "hunter2")
    assert (leaf2.sample_interval_s, leaf2.tls.ca, leaf2.credentials) == (2.0, b"-----BEGIN CERTIFICATE-----\n", None)
    assert "hunter2" not in repr(config)


@pytest.mark.parametrize(("old", "new", "where"), [
    ("path_set: sonic", "path_set: eos", ":5: targets[0].path_set: must be one of sonic, cumulus"),
    ("password_file: pw", "password_file: nope", ":7: targets[0].password_file: cannot read nope"),
    ("address: 10.0.0.1:8080", "address: 10.0.0.1", ":4: targets[0].address: must be host:port"),
    ("    ca_file: ca.pem", "    cert_file: ca.pem", ":12: targets[1].cert_file: needs ca_file"),
    ("    sample_interval_s: 2", "    sample_intervall_s: 2", ":11: targets[1].sample_intervall_s: unknown key"),
    ("name: leaf2", "name: leaf1", "targets[1].name: duplicate target 'leaf1'"),
])
def test_errors_name_file_line_and_key(tmp_path, old, new, where) -> None:
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(str(path)) and where in str(caught.value), str(caught.value)
