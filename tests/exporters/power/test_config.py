"""Power exporter config: the contract format, and errors that name FILE:LINE: key."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from lockstep.exporters.power.config import load_config
from lockstep.exporters.toolkit.configfile import ConfigError

GOOD = """\
interval_s: 15
timeout_s: 5
targets:
  - name: r1-pdu
    kind: pdu
    url: https://10.0.0.5/
    rack: r1
    budget_watts: 60000
    username_file: r1.user
    password_file: r1.pass
    tls_verify: false
  - name: node00
    kind: bmc
    url: http://127.0.0.1:8000/node00
    rack: r1
    username_env: LOCKSTEP_TEST_USER
    password_env: LOCKSTEP_TEST_PASS
  - name: node01-ipmi
    kind: ipmi
    url: local
"""


def write(tmp_path, text: str):
    (tmp_path / "r1.user").write_text("admin\n")
    (tmp_path / "r1.pass").write_text("pdu-secret\n")
    path = tmp_path / "power.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("LOCKSTEP_TEST_USER", "root")
    monkeypatch.setenv("LOCKSTEP_TEST_PASS", "bmc-secret")


def test_contract_config(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    pdu, bmc, ipmi = config.targets
    assert (config.interval_s, config.timeout_s) == (15.0, 5.0)
    assert (pdu.url, pdu.tls_verify, pdu.budget_watts) == ("https://10.0.0.5", False, 60000.0)
    assert (pdu.credentials.username, pdu.credentials.password) == ("admin", "pdu-secret")  # relative to the file
    assert (bmc.credentials.password, bmc.tls_verify, bmc.url) == ("bmc-secret", True, "http://127.0.0.1:8000/node00")
    assert ipmi.credentials is None and config.rack_budgets() == {"r1": 60000.0}
    assert "secret" not in repr(config)


@pytest.mark.parametrize("old, new, line, key, reason", [
    ("kind: pdu", "kind: ups", 5, "targets[0].kind", "must be one of bmc, pdu, cdu, ipmi"),
    ("    tls_verify: false", "    tls_verfy: false", 11, "targets[0].tls_verfy", "unknown key"),
    ("timeout_s: 5", "timeout_s: 0", 2, "timeout_s", "must be > 0"),
    ("url: https://10.0.0.5/", "url: 10.0.0.5", 6, "targets[0].url", "http(s) URL"),
    ("url: https://10.0.0.5/", "url: https://admin:pw@10.0.0.5", 6, "targets[0].url", "must not carry credentials"),
    ("password_file: r1.pass", "password_file: missing.pass", 10, "targets[0].password_file", "cannot read"),
    ("LOCKSTEP_TEST_PASS", "LOCKSTEP_TEST_UNSET", 17, "targets[1].password_env", "is not set"),
    ("name: node00", "name: r1-pdu", 12, "targets[1].name", "duplicate target name"),
    ("budget_watts: 60000", "budget_watts: -1", 8, "targets[0].budget_watts", "must be > 0"),
    ("    url: local\n", "", 18, "targets[2].url", "required key is missing"),
    ("name: r1-pdu", "name: " + "p" * 129, 4, "targets[0].name", "longer than 128 characters"),
    ("rack: r1\n    budget", "rack: " + "r" * 129 + "\n    budget", 7, "targets[0].rack", "longer than 128 characters"),
])
def test_errors_name_file_line_and_key(tmp_path, old, new, line, key, reason):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.file, err.value.line, err.value.key) == (str(path), line, key)
    assert reason in err.value.reason
    assert "secret" not in str(err.value)


def test_a_name_and_rack_of_128_characters_are_taken(tmp_path):
    config = load_config(write(tmp_path, GOOD.replace("name: r1-pdu", "name: " + "p" * 128)
                               .replace("rack: r1\n    budget", "rack: " + "r" * 128 + "\n    budget")))
    assert (config.targets[0].name, config.targets[0].rack) == ("p" * 128, "r" * 128)


def test_conflicting_rack_budgets(tmp_path):
    text = GOOD.replace("    username_env: LOCKSTEP_TEST_USER", "    budget_watts: 50000\n    username_env: LOCKSTEP_TEST_USER")
    with pytest.raises(ConfigError, match=r"power.yaml:16: targets\[1\].budget_watts: rack 'r1' already has"):
        load_config(write(tmp_path, text))


@pytest.mark.integration
def test_cli_reports_config_errors_with_exit_2(tmp_path):
    path = write(tmp_path, GOOD.replace("kind: bmc", "kind: bmcc"))
    bad = subprocess.run([sys.executable, "-m", "lockstep", "power-exporter", "--config", str(path), "--config.check"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert f"{path}:13: targets[1].kind: must be one of" in bad.stderr


@pytest.mark.integration
def test_open_files_soft_limit_is_lifted_towards_the_hard_limit():
    import subprocess
    import sys

    code = ("import resource; from lockstep.exporters.power.cli import raise_open_files_limit; "
            "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE); "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)); "
            "print(raise_open_files_limit(cap=4096), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    got, now, hard = int(out[0]), int(out[1]), int(out[2])
    expected = 4096 if hard < 0 or hard >= 4096 else hard   # RLIM_INFINITY is -1
    assert got == now == expected
