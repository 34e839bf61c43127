"""Start and stop the real Prometheus-stack processes (Debian's binaries) on 127.0.0.1.

Used by the demo, the integration tests and the benchmarks: every process gets its own port (free
ephemeral one unless given), its own temp directory and log file, and is stopped on exit.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

DEBIAN_PACKAGES = {
    "prometheus": "prometheus", "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager", "amtool": "prometheus-alertmanager",
    "prometheus-node-exporter": "prometheus-node-exporter",
    "victoria-metrics": "victoria-metrics", "vmctl": "victoria-metrics", "script": "bsdutils",
    "ip": "iproute2", "ethtool": "ethtool", "setpriv": "util-linux", "systemd-analyze": "systemd",
    "kubectl": "kubernetes-client",
}


class MissingBinary(RuntimeError):
    pass


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        package = DEBIAN_PACKAGES.get(name, name)
        raise MissingBinary(f"{name} not found on PATH; install the Debian package: apt-get install {package}")
    return path


_HANDED_OUT: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, never one this process was given before: the kernel can hand a just-closed
    ephemeral port out again, and servers started together (one node agent per simulated node) pick
    all their ports before any of them binds."""
    while True:
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on the port. SO_REUSEADDR as the servers themselves bind: connections
    of a stopped run lingering in TIME_WAIT must not make a restart look blocked."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


@dataclass
class Service:
    name: str
    url: str
    proc: subprocess.Popen
    workdir: Path
    log_path: Path
    log_start: int = 0   # where this run's output begins in a log shared with earlier runs

    def log_since_start(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def wait_on(check: Callable[[], bool], timeout: float, what: str | Callable[[], str],
            services: Sequence[Service] = (), every: float = 0.25) -> None:
    """Poll ``check`` until it holds; after ``timeout`` seconds raise TimeoutError naming ``what`` (a
    string, or a callable for what is known only then) with the tail of each service's log."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {s.name}\n{s.log_tail(15)}" for s in services)
            what = what() if callable(what) else what
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")
        time.sleep(every)


def http_get(url: str, timeout: float = 5.0, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_ready(service: Service, path: str = "/-/ready", timeout: float = 60.0) -> None:
    def ready() -> bool:
        try:
            return http_get(service.url + path, timeout=2)[0] == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False
    _wait_started(service, ready, f"not ready at {service.url}", timeout)


def wait_logged(service: Service, marker: str, timeout: float = 60.0) -> None:
    """Wait until ``marker`` is in the service's log: readiness of a server whose HTTP answers need
    credentials or a client certificate the stack does not hold."""
    _wait_started(service, lambda: marker in service.log_since_start(), f"did not log {marker!r}", timeout)


def _wait_started(service: Service, ready: Callable[[], bool], failure: str, timeout: float) -> None:
    """Poll ``ready`` while the process lives; RuntimeError with its log's tail when it exits first, or
    after ``timeout`` seconds (it is then stopped): ``on_free_port`` reads a lost port race from it."""
    deadline = time.monotonic() + timeout
    while True:
        if not service.alive():
            raise RuntimeError(f"{service.name} exited with {service.proc.returncode}:\n{service.log_tail()}")
        if ready():
            return
        if time.monotonic() > deadline:
            service.stop()
            raise RuntimeError(f"{service.name} {failure} after {timeout}s:\n{service.log_tail()}")
        time.sleep(0.2)


def start_process(name: str, argv: Sequence[str], workdir: Path, url: str, ready_path: str | None = "/-/ready",
                  timeout: float = 60.0, ready_log: str | None = None) -> Service:
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    log = open(log_path, "ab")
    start = log.tell()
    proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=workdir, start_new_session=True)
    log.close()
    service = Service(name, url, proc, workdir, log_path, start)
    if ready_log is not None:
        wait_logged(service, ready_log, timeout)
    elif ready_path is not None:
        wait_ready(service, ready_path, timeout)
    return service


def on_free_port(start: Callable[[int], Service], port: int | None = None, attempts: int = 3) -> Service:
    """``start(port)``, or ``start`` on a free ephemeral port when ``port`` is None. Another process can take
    a free port between the check and the server's bind (an outgoing connection's ephemeral port, say): a
    start that fails with "address already in use" is then tried again on a new free port."""
    for _ in range(attempts - 1):
        try:
            return start(port or free_port())
        except RuntimeError as exc:
            if port is not None or not bind_failed(exc):
                raise
    return start(port or free_port())


def start_on_port(name: str, argv_for: Callable[[int], Sequence[str]], workdir: Path, port: int | None = None,
                  ready_path: str = "/-/ready", timeout: float = 60.0, ready_log: str | None = None,
                  scheme: str = "http") -> Service:
    """A server whose command line ``argv_for(port)`` names its listening port; see ``on_free_port``."""
    return on_free_port(lambda p: start_process(name, argv_for(p), workdir, f"{scheme}://127.0.0.1:{p}", ready_path,
                                                timeout, ready_log), port)


def bind_failed(exc: BaseException) -> bool:
    """True if a start failed because its port was taken (Go's and Python's wording alike)."""
    return "address already in use" in str(exc).lower()


def _write_config(path: Path, config: dict[str, Any] | str) -> Path:
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False))
    return path


def start_prometheus(config: dict[str, Any] | str, workdir: Path, port: int | None = None,
                     extra_args: Sequence[str] = (), retention: str = "400d",
                     web_config: dict[str, Any] | None = None) -> Service:
    """``config`` is a prometheus.yml (dict or text); rule files it names must already exist.
    Retention is long by default: backfilled simulated months must not be deleted on start.
    ``web_config`` (exporter-toolkit: ``tls_server_config``, ``basic_auth_users``) makes it demand TLS
    and/or credentials; it is then ready when it says so in its log."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = _write_config(workdir / "prometheus.yml", config)
    web_args = [f"--web.config.file={_write_config(workdir / 'web.yml', web_config)}"] if web_config else []
    binary = require_binary("prometheus")
    return start_on_port("prometheus", lambda p: [
        binary, f"--config.file={config_file}", f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{p}", "--web.enable-lifecycle", "--web.enable-admin-api",
        f"--storage.tsdb.retention.time={retention}", *web_args, *extra_args], workdir, port,
        ready_log="Server is ready to receive web requests" if web_config else None,
        scheme="https" if web_config and "tls_server_config" in web_config else "http")


def reload_prometheus(prometheus: Service, config: dict[str, Any] | str | None = None) -> None:
    """Make a running ``start_prometheus`` (plain HTTP) read its files again, with ``config`` as its new
    prometheus.yml if given (else the rule files it names may have changed): its lifecycle API answers
    once the reload is applied, or with the reason it refused it. A new config is how a target known only
    once it has bound its port joins, such as a service that queries this Prometheus, started after it."""
    if config is not None:
        _write_config(prometheus.workdir / "prometheus.yml", config)
    status, body = http_get(prometheus.url + "/-/reload", method="POST", timeout=30)
    if status != 200:
        raise RuntimeError(f"prometheus refused its new config ({status}): {body.decode(errors='replace')}")


def start_alertmanager(config: dict[str, Any] | str, workdir: Path, port: int | None = None) -> Service:
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = _write_config(workdir / "alertmanager.yml", config)
    binary = require_binary("prometheus-alertmanager")
    return start_on_port("alertmanager", lambda p: [
        binary, f"--config.file={config_file}", f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{p}",
        "--cluster.listen-address="], workdir, port)  # no gossip: a single local instance


def start_node_exporter(args: Sequence[str], workdir: Path, port: int | None = None) -> Service:
    binary = require_binary("prometheus-node-exporter")
    return start_on_port("node_exporter", lambda p: [binary, f"--web.listen-address=127.0.0.1:{p}", *args],
                         workdir, port, ready_path="/metrics")


def start_victoria_metrics(workdir: Path, port: int | None = None, extra_args: Sequence[str] = (),
                           retention: str = "100y") -> Service:
    """Single-node VictoriaMetrics with its own defaults: a Prometheus remote_write target
    (``/api/v1/write``) and a Prometheus-compatible query API. Retention is long: simulated months
    lie in the past or the future."""
    workdir.mkdir(parents=True, exist_ok=True)
    binary = require_binary("victoria-metrics")
    return start_on_port("victoria-metrics", lambda p: [
        binary, f"-httpListenAddr=127.0.0.1:{p}", f"-storageDataPath={workdir / 'vm-data'}",
        f"-retentionPeriod={retention}", *extra_args], workdir, port, ready_path="/health")


VMCTL_WORKERS = 32  # see vmctl_from_prometheus


def vmctl_from_prometheus(tsdb_dir: Path, service: Service, timeout: float = 300.0, attempts: int = 5) -> str:
    """Copy the blocks of a Prometheus TSDB (``--storage.tsdb.path``, or a snapshot of it) into a
    VictoriaMetrics, as a migration does: ``vmctl prometheus``, then a flush and a reset of the
    response cache. Returns vmctl's output (its statistics).

    vmctl 1.79 draws progress bars on the controlling terminal and fails without one (later versions
    have --disable-progress-bar): it runs under script(1), which gives it a pseudo-terminal.

    vmctl before 1.85 also loses the series still queued for its import workers when it closes them,
    and says so in its statistics (docs/deploy.md, "Migrating with vmctl older than 1.85"): it runs with
    many workers, which makes that rare, and again while a run came short; the VictoriaMetrics must
    then collapse the samples imported twice (``-dedup.minScrapeInterval=1ms``)."""
    vmctl = require_binary("vmctl")
    argv = [vmctl, "prometheus", "-s", f"--prom-snapshot={tsdb_dir}", f"--vm-addr={service.url}",
            f"--vm-concurrency={VMCTL_WORKERS}"]
    for _ in range(attempts):
        result = subprocess.run([require_binary("script"), "-qec", shlex.join(argv), "/dev/null"],
                                capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise RuntimeError(f"vmctl prometheus failed ({result.returncode}): {result.stdout[-2000:]}")
        held, imported = _vmctl_samples(result.stdout)
        if imported >= held:
            break
    else:
        raise RuntimeError(f"vmctl imported {imported} of the snapshot's {held} samples in {attempts} runs")
    # Searchable now, and no answer cached while the import ran is reused (VictoriaMetrics caches
    # range queries over data older than -search.cacheTimestampOffset as final).
    for path in ("/internal/force_flush", "/internal/resetRollupResultCache"):
        status, body = http_get(f"{service.url}{path}", timeout=30)
        if status != 200:
            raise RuntimeError(f"{service.url}{path}: HTTP {status}: {body[:200]!r}")
    return result.stdout


def _vmctl_samples(output: str) -> tuple[int, int]:
    """The samples vmctl's statistics say the snapshot holds, and those it imported."""
    held = re.search(r"^\s*samples: (\d+)", output, re.M)
    imported = re.search(r"total samples: (\d+)", output)
    if not (held and imported):
        raise RuntimeError(f"vmctl printed no statistics: {output[-2000:]}")
    return int(held.group(1)), int(imported.group(1))


def remote_write_to(service: Service, flush_s: float = 1.0) -> dict[str, Any]:
    """A prometheus.yml ``remote_write`` entry sending everything to ``service`` (VictoriaMetrics,
    Mimir, Thanos receive), flushed at least every ``flush_s`` seconds."""
    return {"url": f"{service.url}/api/v1/write",
            "queue_config": {"batch_send_deadline": f"{flush_s:g}s", "min_backoff": "100ms", "max_backoff": "1s"}}


def query(service_url: str, promql: str, time_s: float | None = None) -> list[dict[str, Any]]:
    """Instant query; raises on a PromQL error with Prometheus' own message."""
    from urllib.parse import urlencode
    params = {"query": promql}
    if time_s is not None:
        params["time"] = str(time_s)
    status, body = http_get(f"{service_url}/api/v1/query?{urlencode(params)}", timeout=30)
    payload = json.loads(body)
    if status != 200 or payload.get("status") != "success":
        raise RuntimeError(f"query {promql!r} failed: {payload.get('error', body[:200])}")
    return payload["data"]["result"]


@dataclass
class Stack:
    """Owns a set of services and stops them all (in reverse order) on exit."""

    services: list[Service] = field(default_factory=list)

    def add(self, service: Service) -> Service:
        self.services.append(service)
        return service

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
