"""Where the API server is and how to authenticate: in-cluster (the pod's service account) or a kubeconfig.

In a pod, client-go's ``rest.InClusterConfig`` rules apply: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the
projected service-account token and CA under ``/var/run/secrets/kubernetes.io/serviceaccount``. The token
is a bound token the kubelet rotates (about hourly), so it is read again for every request, as client-go
re-reads it. Out of the cluster, a kubeconfig file: its current (or a named) context's server, CA and
user, with a token, a token file or a client certificate; exec plugins and auth providers (cloud SSO)
are refused with a clear error: give the agent a service-account token instead. The kubeconfig is read
with the bounded loader every lockstep config goes through (exporters/toolkit/configfile.py: no alias
bomb expands), and what is wrong in it is named by file, line and key.
"""
from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ApiServer:
    url: str                                  # https://host:port (http:// only for local tests and the demo)
    ca_pem: str | None = None                 # PEM of the CA that signed the server's certificate
    token: str | None = None
    token_file: Path | None = None            # read again for each request
    client_cert: tuple[str, str] | None = None   # (certificate PEM, key PEM)
    insecure: bool = False                    # insecure-skip-tls-verify

    def headers(self) -> dict[str, str]:
        token = self.token_file.read_text().strip() if self.token_file else self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https://"):
            return None
        context = ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else ssl.create_default_context()
        if self.insecure:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        if self.client_cert:
            _load_cert_chain(context, *self.client_cert)
        return context


def _load_cert_chain(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """``ssl`` loads a client certificate from files only: a private temporary directory, removed at once."""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        for path, text in ((cert, cert_pem), (key, key_pem)):
            path.write_text(text)
            path.chmod(0o600)
        context.load_cert_chain(cert, key)


def in_cluster(env: Mapping[str, str], account: Path = SERVICE_ACCOUNT) -> ApiServer:
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ValueError("not in a Kubernetes pod (KUBERNETES_SERVICE_HOST unset): give --jobs.kubernetes.kubeconfig")
    if not (account / "token").is_file():
        raise ValueError(f"no service-account token at {account / 'token'} (automountServiceAccountToken: false?)")
    host = f"[{host}]" if ":" in host else host   # an IPv6 service address
    return ApiServer(f"https://{host}:{port}", ca_pem=(account / "ca.crt").read_text(),
                     token_file=account / "token")


def from_kubeconfig(path: Path, context: str | None = None) -> ApiServer:
    """The API server of ``context`` (default: the current context) in the kubeconfig at ``path``;
    ``ConfigError`` (FILE:LINE: key: reason) for what is missing or wrong in it."""
    data = load_yaml(path)
    config = Section({} if data is None else data, path)
    name = context or config.get("current-context", str, None)
    ctx = _named(config, "contexts", name, path).section("context", {})
    cluster_name, user_name = ctx.get("cluster", str, None), ctx.get("user", str, None)
    cluster = _named(config, "clusters", cluster_name, path).section("cluster", {})
    user = _named(config, "users", user_name, path).section("user", {}) if user_name else Section({}, path, "user")
    if "exec" in user.data or "auth-provider" in user.data:
        raise user.error("exec" if "exec" in user.data else "auth-provider",
                         f"user {user_name!r} authenticates with an exec plugin or auth provider, which lockstep "
                         "does not run: use a token, a token file or a client certificate")
    server = cluster.get("server", str, None)
    if not server:
        raise ConfigError(path, cluster.line, cluster.key, f"cluster {cluster_name!r} has no server")
    base = path.parent
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    token_file = user.get("tokenFile", str, None)
    return ApiServer(server.rstrip("/"), ca_pem=_pem(cluster, "certificate-authority", base),
                     token=_secret(user, "token"), token_file=base / token_file if token_file else None,
                     client_cert=(cert, key) if cert and key else None,
                     insecure=cluster.get("insecure-skip-tls-verify", bool, False))


def _named(config: Section, section: str, name: str | None, path: Path) -> Section:
    for entry in config.sections(section):
        if entry.get("name", str, None) == name:
            return entry
    raise ConfigError(path, config.line_of(section) if section in config.data else None, section,
                      f"no {section[:-1]} named {name!r}")


def _pem(section: Section, key: str, base: Path) -> str | None:
    """``key-data`` (base64) or ``key`` (a file, relative to the kubeconfig's directory)."""
    if data := _secret(section, f"{key}-data"):
        try:
            return base64.b64decode(data).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise section.error(f"{key}-data", "not base64 of a PEM text") from None
    if name := section.get(key, str, None):
        try:
            return (base / os.path.expanduser(name)).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise section.error(key, f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") from None
    return None


def _secret(section: Section, key: str) -> str | None:
    """A string that may be a secret (a token, a private key): a wrong type is named, its value never quoted."""
    value = section.data.get(key)
    if value is not None and not isinstance(value, str):
        raise section.error(key, f"must be str, got {type(value).__name__}")
    return value
