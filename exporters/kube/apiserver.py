"""Where the API server is and how to authenticate: in-cluster (the pod's service account) or a kubeconfig.

In a pod, client-go's ``rest.InClusterConfig`` rules apply: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the
projected service-account token and CA under ``/var/run/secrets/kubernetes.io/serviceaccount``. The token
is a bound token the kubelet rotates (about hourly), so it is read again for every request, as client-go
re-reads it. Out of the cluster, a kubeconfig file: its current (or a named) context's server, CA and
user, with a token, a token file or a client certificate; exec plugins and auth providers (cloud SSO)
are refused with a clear error: give the agent a service-account token instead.
"""
from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

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
    """The API server of ``context`` (default: the current context) in the kubeconfig at ``path``."""
    config = yaml.safe_load(path.read_text()) or {}
    name = context or config.get("current-context")
    ctx = _named(config, "contexts", name, path).get("context") or {}
    cluster = _named(config, "clusters", ctx.get("cluster"), path).get("cluster") or {}
    user = (_named(config, "users", ctx["user"], path).get("user") or {}) if ctx.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        raise ValueError(f"{path}: user {ctx.get('user')!r} authenticates with an exec plugin or auth provider, "
                         "which lockstep does not run: use a token, a token file or a client certificate")
    if not cluster.get("server"):
        raise ValueError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    token_file = user.get("tokenFile")
    return ApiServer(cluster["server"].rstrip("/"), ca_pem=_pem(cluster, "certificate-authority", base),
                     token=user.get("token"), token_file=base / token_file if token_file else None,
                     client_cert=(cert, key) if cert and key else None,
                     insecure=bool(cluster.get("insecure-skip-tls-verify")))


def _named(config: Mapping[str, Any], section: str, name: str | None, path: Path) -> Mapping[str, Any]:
    for entry in config.get(section) or ():
        if entry.get("name") == name:
            return entry
    raise ValueError(f"{path}: no {section[:-1]} named {name!r}")


def _pem(section: Mapping[str, Any], key: str, base: Path) -> str | None:
    """``key-data`` (base64) or ``key`` (a file, relative to the kubeconfig's directory)."""
    if section.get(f"{key}-data"):
        return base64.b64decode(section[f"{key}-data"]).decode()
    if section.get(key):
        return (base / os.path.expanduser(section[key])).read_text()
    return None
