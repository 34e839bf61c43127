"""How lockstep authenticates to Prometheus, Thanos or Mimir: flags → one frozen, validated ``PromAuth``.

The same flags on ``lockstep analytics serve``, ``lockstep analytics evaluate --prometheus-url`` and
``lockstep report monthly``; ``lockstep.analytics.prom.session`` turns a ``PromAuth`` into the aiohttp session
all three use. Secrets come from files only (argv is world-readable in ``/proc/<pid>/cmdline``), so
credentials embedded in ``--prometheus-url`` (``http://user:pass@host``) are refused.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

# Header names a flag may not set: credentials belong in files, and these are the session's own.
_RESERVED_HEADERS = {"authorization": "--prometheus-bearer-token-file or --prometheus-password-file",
                     "proxy-authorization": "a file flag", "host": "--prometheus-url",
                     "accept-encoding": "--prometheus-gzip",
                     "content-length": "", "transfer-encoding": ""}
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")   # RFC 9110 header field name


@dataclass(frozen=True)
class PromAuth:
    bearer_token_file: str | None = None   # re-read when it changes (rotated service-account tokens)
    username: str | None = None            # basic auth, with password_file (re-read when it changes)
    password_file: str | None = None
    ca_file: str | None = None             # CA bundle to verify the server with (default: the system's)
    cert_file: str | None = None           # client certificate and key (mutual TLS), read at start
    key_file: str | None = None
    insecure_skip_verify: bool = False
    headers: tuple[tuple[str, str], ...] = ()   # e.g. (("X-Scope-OrgID", "tenant-a"),) for Mimir
    gzip: bool = False                     # --prometheus-gzip: ask for compressed answers (``session.accept_encoding``)

    def __post_init__(self) -> None:
        if self.bearer_token_file and (self.username or self.password_file):
            raise ValueError("--prometheus-bearer-token-file and basic auth (--prometheus-username, "
                             "--prometheus-password-file) are mutually exclusive")
        if bool(self.username) != bool(self.password_file):
            raise ValueError("basic auth needs both --prometheus-username and --prometheus-password-file")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs both --prometheus-cert-file and --prometheus-key-file")
        if self.username and ":" in self.username:
            raise ValueError("--prometheus-username may not contain ':' (RFC 7617)")

    @property
    def tls_options(self) -> bool:
        return bool(self.ca_file or self.cert_file or self.insecure_skip_verify)

    def describe(self) -> str:
        """How requests authenticate, for the landing page and logs: file names and header names, no secret."""
        parts = []
        if self.bearer_token_file:
            parts.append(f"bearer token from {self.bearer_token_file}")
        if self.username:
            parts.append(f"basic auth as {self.username} (password from {self.password_file})")
        if self.cert_file:
            parts.append(f"client certificate {self.cert_file}")
        if self.insecure_skip_verify:
            parts.append("server certificate NOT verified")
        elif self.ca_file:
            parts.append(f"server verified with {self.ca_file}")
        if self.headers:
            parts.append("headers " + ", ".join(name for name, _ in self.headers))
        return "; ".join(parts) or "none"


def check_url(url: str, auth: PromAuth = PromAuth(), flag: str = "--prometheus-url") -> str:
    """``url`` if it is a usable base URL; ValueError (naming ``flag``, never the password) otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{flag} {redact_url(url)!r}: want http(s)://HOST:PORT[/prefix]")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{flag}: credentials in the URL are refused (they would show in the process list, "
                         "logs and the landing page); use --prometheus-username with --prometheus-password-file, "
                         "or --prometheus-bearer-token-file")
    if parts.scheme == "http" and auth.tls_options:
        raise ValueError(f"{flag} is http://, but TLS flags (--prometheus-ca-file, --prometheus-cert-file, "
                         "--prometheus-insecure-skip-verify) were given: use https://")
    return url


def redact_url(text: str) -> str:
    """Any ``scheme://user:pass@`` in ``text`` with its userinfo replaced (for messages about a bad URL)."""
    return re.sub(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@", r"\1<redacted>@", text)


def parse_header(text: str) -> tuple[str, str]:
    """``'Name: value'`` (as curl's -H) → (name, value)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
        raise ValueError("--prometheus-header: expected 'Name: value', e.g. 'X-Scope-OrgID: tenant-a'")
    if name.lower() in _RESERVED_HEADERS:
        instead = _RESERVED_HEADERS[name.lower()]
        raise ValueError(f"--prometheus-header: {name} may not be set by a flag"
                         + (f"; use {instead}" if instead else ""))
    return name, value


def add_flags(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--prometheus-url`` and the authentication flags."""
    p.add_argument("--prometheus-url", required=required, help="Prometheus (or Thanos/Mimir) query API base URL; "
                   "credentials in it are refused: use the file flags below")
    add_gzip_flag(p)
    g = p.add_argument_group("authentication to Prometheus (secrets from files only)")
    g.add_argument("--prometheus-bearer-token-file", metavar="FILE",
                   help="send 'Authorization: Bearer <token>' with the token in FILE (re-read when it changes)")
    g.add_argument("--prometheus-username", metavar="NAME", help="basic auth user name")
    g.add_argument("--prometheus-password-file", metavar="FILE",
                   help="basic auth password in FILE (re-read when it changes)")
    g.add_argument("--prometheus-ca-file", metavar="FILE", help="CA certificates to verify the server with")
    g.add_argument("--prometheus-cert-file", metavar="FILE", help="client certificate (mutual TLS)")
    g.add_argument("--prometheus-key-file", metavar="FILE", help="client certificate key (mutual TLS)")
    g.add_argument("--prometheus-insecure-skip-verify", action="store_true",
                   help="do not verify the server's certificate (testing only)")
    g.add_argument("--prometheus-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="extra request header, repeatable (e.g. 'X-Scope-OrgID: tenant-a' for Mimir)")


def add_gzip_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus-gzip", action="store_true",
                   help="ask the store to gzip its answers, for one across a slow link (by default they come "
                        "uncompressed: gzip costs Prometheus several times the CPU of the query itself)")


def auth_from_args(args: argparse.Namespace) -> PromAuth:
    return PromAuth(
        bearer_token_file=args.prometheus_bearer_token_file, username=args.prometheus_username,
        password_file=args.prometheus_password_file, ca_file=args.prometheus_ca_file,
        cert_file=args.prometheus_cert_file, key_file=args.prometheus_key_file,
        insecure_skip_verify=args.prometheus_insecure_skip_verify,
        headers=tuple(parse_header(h) for h in args.prometheus_header), gzip=args.prometheus_gzip)
