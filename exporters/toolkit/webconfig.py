"""The Prometheus exporter-toolkit web config file (``--web.config.file``): TLS and basic auth.

Same keys as node_exporter's, so a site's existing file locks down lockstep too:
https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class TLSConfig:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str = "TLS13"


@dataclass(frozen=True)
class WebConfig:
    file: str
    tls: TLSConfig | None = None
    basic_auth_users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def add_flags(parser, default_listen: str, web_config: bool = True) -> None:
    """``--web.listen-address`` (and ``--web.config.file``), as every Prometheus exporter has them, and the
    connection timeouts (``lockstep.exporters.toolkit.conntimeouts``)."""
    from lockstep.exporters.toolkit.conntimeouts import add_flags as add_timeout_flags

    parser.add_argument("--web.listen-address", dest="web.listen-address", default=default_listen,
                        help="address to listen on, HOST:PORT or :PORT (port 0 picks a free one)")
    add_timeout_flags(parser)
    if web_config:
        parser.add_argument("--web.config.file", dest="web.config.file", default=None,
                            help="exporter-toolkit web config (TLS, basic_auth_users with bcrypt hashes)")


def _bcrypt_hash(value: str) -> str | None:
    return None if value.startswith(("$2a$", "$2b$", "$2y$")) and len(value) == 60 else \
        "must be a bcrypt hash ($2a$/$2b$/$2y$..., 60 characters), not a plain password"


def _path(section: Section, key: str, base: Path, required: bool) -> Path | None:
    value = section.get(key, str, None)
    if value is None:
        if required:
            raise section.error(key, "required key is missing")
        return None
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file():
        raise section.error(key, f"file {value!r} does not exist or is not a file")
    return path


def load_web_config(path: str | Path) -> WebConfig:
    """Parse and fully validate the file, including loading the TLS key pair."""
    data = load_yaml(path)
    top = Section(data if data is not None else {}, path)
    base = Path(path).parent
    tls = None
    if (t := top.section("tls_server_config", None)) is not None:
        tls = TLSConfig(
            cert_file=_path(t, "cert_file", base, True),
            key_file=_path(t, "key_file", base, True),
            client_auth_type=t.get("client_auth_type", str, "NoClientCert", one_of(*_CLIENT_AUTH)),
            client_ca_file=_path(t, "client_ca_file", base, False),
            min_version=t.get("min_version", str, "TLS12", one_of(*_VERSIONS)),
            max_version=t.get("max_version", str, "TLS13", one_of(*_VERSIONS)),
        )
        for ignored in ("cipher_suites", "curve_preferences", "prefer_server_cipher_suites"):
            t.get(ignored, (list, bool), None)  # accepted for compatibility; OpenSSL defaults apply
        t.finish()
        if tls.client_auth_type in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven") and not tls.client_ca_file:
            raise t.error("client_ca_file", f"required when client_auth_type is {tls.client_auth_type}")
    users: dict[str, bytes] = {}
    if (u := top.section("basic_auth_users", None)) is not None:
        for user in list(u.data):
            users[str(user)] = u.get(user, str, check=_bcrypt_hash).encode()
        u.finish()
    headers: dict[str, str] = {}
    if (h := top.section("http_server_config", None)) is not None:
        h.get("http2", bool, None)
        if (hdr := h.section("headers", None)) is not None:
            headers = {str(k): hdr.get(k, str) for k in list(hdr.data)}
            hdr.finish()
        h.finish()
    top.finish()
    config = WebConfig(str(path), tls, users, headers)
    if tls:
        ssl_context(config)  # fail at start, not on the first scrape
    return config


def ssl_context(config: WebConfig) -> ssl.SSLContext | None:
    tls = config.tls
    if tls is None:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[tls.min_version]
    ctx.maximum_version = _VERSIONS[tls.max_version]
    try:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(config.file, None, "tls_server_config.cert_file",
                          f"cannot load certificate/key pair: {exc}") from None
    ctx.verify_mode = _CLIENT_AUTH[tls.client_auth_type]
    if tls.client_ca_file:
        try:
            ctx.load_verify_locations(tls.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(config.file, None, "tls_server_config.client_ca_file", str(exc)) from None
    return ctx
