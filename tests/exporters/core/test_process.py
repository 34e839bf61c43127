"""The node agent as a user runs it: a real `lockstep exporter` process, real HTTP(S) clients."""
from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from base64 import b64encode

import bcrypt
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.helpers.paths import REPO
from tests.helpers.tls import write_server_tls

pytestmark = pytest.mark.integration

PLUGIN = ["--collector.disable-defaults", "--collector.extra-module=lockstep_test_collectors",
          "--collector.test_ok", "--collector.test_fail"]


def env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "plugins"), str(REPO)])}


class Exporter:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "lockstep", "exporter",
                                      "--web.listen-address=127.0.0.1:0", *args],
                                     stderr=subprocess.PIPE, text=True, env=env())
        self.log: list[str] = []
        for line in self.proc.stderr:
            self.log.append(line)
            if match := re.search(r"msg=listening address=(\S+)", line):
                self.url = match.group(1)
                return
        raise AssertionError("exporter exited before listening:\n" + "".join(self.log))

    def stop(self) -> int:
        self.proc.terminate()
        rest = self.proc.communicate(timeout=10)[1]
        self.log.append(rest)
        return self.proc.returncode


@pytest.fixture
def exporter():
    started: list[Exporter] = []

    def start(*args: str) -> Exporter:
        started.append(Exporter(*args))
        return started[-1]

    yield start
    for e in started:
        if e.proc.poll() is None:
            e.stop()


def get(url, headers=None, context=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        return resp.status, resp.headers.get("Content-Type"), resp.read().decode()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockstep", *args], capture_output=True, text=True, env=env(),
                          timeout=60)


def test_failing_collector_reports_zero_while_others_report(exporter):
    e = exporter(*PLUGIN)
    status, ctype, body = get(e.url + "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in parse_text(body) for s in f.samples}
    assert samples[("lockstep_scrape_collector_success", (("collector", "test_fail"),))] == 0
    assert samples[("lockstep_scrape_collector_success", (("collector", "test_ok"),))] == 1
    assert ("lockstep_scrape_collector_duration_seconds", (("collector", "test_fail"),)) in samples
    assert samples[("lockstep_gpu_temperature_celsius", (("gpu", "1"),))] == 43.5
    assert ("lockstep_gpu_temperature_celsius", (("gpu", "7"),)) not in samples  # partial output dropped
    assert e.stop() == 0
    assert "collector failed" in "".join(e.log) and "device went away" in "".join(e.log)


def test_openmetrics_on_request_and_landing_page(exporter):
    e = exporter(*PLUGIN, "--web.telemetry-path=/m")
    status, ctype, body = get(e.url + "/m", {"Accept": "application/openmetrics-text;version=1.0.0"})
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    assert any(f.name == "lockstep_scrape_collector_success" for f in parse_openmetrics(body))
    status, ctype, page = get(e.url + "/")
    assert status == 200 and 'href="/m"' in page and "test_fail" in page


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    write_server_tls(d)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    (d / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
        "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n")
    return d


def basic(user, password):
    return {"Authorization": "Basic " + b64encode(f"{user}:{password}".encode()).decode()}


def test_tls_and_basic_auth(exporter, tls_files):
    e = exporter(*PLUGIN, f"--web.config.file={tls_files / 'web.yml'}")
    assert e.url.startswith("https://")
    ctx = ssl.create_default_context(cafile=str(tls_files / "ca.crt"))
    status, _, body = get(e.url + "/metrics", basic("prometheus", "s3cret"), ctx)
    assert status == 200 and "lockstep_scrape_collector_success" in body
    # cached credentials keep working; the configured header is set
    req = urllib.request.Request(e.url + "/metrics", headers=basic("prometheus", "s3cret"))
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
    for headers in (basic("prometheus", "wrong"), basic("nobody", "s3cret"), {}):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(e.url + "/metrics", headers, ctx)
        assert err.value.code == 401 and err.value.headers["WWW-Authenticate"].startswith("Basic")
    with pytest.raises(urllib.error.URLError):  # an untrusting client refuses the unknown CA
        get(e.url + "/metrics", basic("prometheus", "s3cret"), ssl.create_default_context())
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP to the TLS port
        get(e.url.replace("https://", "http://") + "/metrics")


@pytest.mark.parametrize("content,needle", [
    ("tls_server_config:\n  cert_file: server.crt\n", "tls_server_config.key_file: required key is missing"),
    ("tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n", ":2: tls_server_config.cert_file: file 'nope.crt'"),
    ("basic_auth_users:\n  admin: hunter2\n", ":2: basic_auth_users.admin: must be a bcrypt hash"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: SSL3\n",
     ":4: tls_server_config.min_version: must be one of"),
    ("tls_srever_config: {}\n", ":1: tls_srever_config: unknown key"),
    ("basic_auth_users: [\n", "invalid YAML"),
    ("tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n", "cannot load certificate/key pair"),
])
def test_malformed_web_config_fails_at_start_naming_file_and_key(tls_files, tmp_path, content, needle):
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_bytes((tls_files / name).read_bytes())
    (tmp_path / "web.yml").write_text(content)
    result = run_cli("exporter", "--web.listen-address=127.0.0.1:0", f"--web.config.file={tmp_path / 'web.yml'}")
    assert result.returncode == 2
    assert str(tmp_path / "web.yml") in result.stderr and needle in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args,needle", [
    (["--collector.nope"], "unknown collector 'nope' (known collectors:"),
    (["--no-collector.nope"], "unknown collector 'nope'"),
    (["--web.listen-address=nowhere"], "invalid listen address 'nowhere'"),
    (["--web.listen-address=:99999"], "invalid listen address"),
    (["--log.level=loud"], "invalid choice: 'loud'"),
    (["--web.telemetry-path=metrics"], "--web.telemetry-path must start with '/'"),
    (["--sim.node-root=/nonexistent/node00"], "is not a directory"),
    (["--collector.extra-module=no_such_module_xyz"], "no_such_module_xyz"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_bad_flags_exit_2_with_a_clear_message(args, needle):
    result = run_cli("exporter", *args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_port_in_use_is_a_clear_error(exporter):
    e = exporter(*PLUGIN)
    port = e.url.rsplit(":", 1)[1]
    result = run_cli("exporter", *PLUGIN, f"--web.listen-address=127.0.0.1:{port}")
    assert result.returncode != 0 and "cannot listen on 127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_subcommand_has_useful_help():
    top = run_cli("--help")
    assert top.returncode == 0
    for command in ("exporter", "power-exporter", "switch-exporter", "analytics", "sim", "dashboards", "alerts", "report",
                    "demo"):
        assert command in top.stdout
        sub = run_cli(command, "--help")
        assert sub.returncode == 0 and "usage: lockstep " + command in sub.stdout, command
    for command in (("exporter",), ("power-exporter",), ("switch-exporter",), ("analytics", "serve")):
        text = " ".join(run_cli(*command, "--help").stdout.split())   # argparse wraps lines
        # a derived default (None) is described in the flag's help, never shown as "None"
        assert "(default: None)" not in text and "(default: False)" not in text, command
        assert "(default: " in text, command
    assert "(default: :9840)" in " ".join(run_cli("exporter", "--help").stdout.split())


def test_the_node_agent_does_not_import_the_analytics_stack():
    """Only the chosen subcommand's module is imported: pandas & co. would triple the agent's RSS."""
    code = ("import sys; from lockstep.cli import build_parser; build_parser(['exporter']); "
            "print(','.join(m for m in ('pandas', 'numpy', 'sklearn', 'matplotlib', 'grafanalib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), check=True)
    assert out.stdout.strip() == ""
