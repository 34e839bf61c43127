"""The aiohttp session that talks to Prometheus, Thanos or Mimir as a ``PromAuth`` says: one way to build
it for ``lockstep analytics serve``, ``lockstep analytics evaluate --prometheus-url`` and
``lockstep report monthly``.

Secrets are read from their files when a request is sent, again only when the file changed (one
``stat`` per request): a rotated service-account token or password is picked up without a restart,
as Prometheus does with its own ``credentials_file``. Credentials go only to the base URL's origin
(scheme, host, port), never to a host a redirect points at. ``Credentials.redact`` hides every
secret value seen so far (and the basic-auth encoding of it) in text bound for a log, a page or
an error message.
"""
from __future__ import annotations

import logging
import os
import ssl
from collections import deque

import aiohttp
from yarl import URL

from lockstep.analytics.prom.auth import PromAuth, redact_url
from lockstep.exporters.toolkit.credentials import basic_auth, basic_token
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.version import VERSION

log = logging.getLogger("lockstep.analytics.prometheus")
REDACTED = "<redacted>"


class CredentialsError(aiohttp.ClientError, ValueError):
    """A secret file that cannot be read or holds no usable value (the message names the file, not its content)."""


class Refused(aiohttp.ClientError):
    """Prometheus (or the proxy in front of it) answered 401 or 403: the credentials are missing or wrong."""


class FileSecret:
    """The stripped content of a secret file, re-read when the file's identity or mtime changes."""

    def __init__(self, path: str, flag: str, strip: str | None = None) -> None:
        self.path, self.flag, self._strip = path, flag, strip
        self._stamp: tuple[int, ...] | None = None
        self._value = ""
        self.seen: deque[str] = deque(maxlen=4)   # recent values, for redaction after a rotation

    def value(self) -> str:
        try:
            st = os.stat(self.path)   # follows symlinks: Kubernetes swaps a ..data link on rotation
            stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read().strip(self._strip)
                self._check(text)
                self._value, self._stamp = text, stamp
                if text not in self.seen:
                    self.seen.append(text)
                    log.info("credentials read", extra=kv(file=self.path))
        except (OSError, UnicodeDecodeError) as exc:
            raise CredentialsError(f"{self.flag} {self.path}: cannot read: {getattr(exc, 'strerror', None) or exc}") \
                from None
        return self._value

    def _check(self, text: str) -> None:
        if not text:
            raise CredentialsError(f"{self.flag} {self.path}: the file is empty")
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise CredentialsError(f"{self.flag} {self.path}: holds control characters or more than one line")


class Credentials:
    """The headers a ``PromAuth`` sends, read from its files, and the redaction of their values."""

    def __init__(self, auth: PromAuth) -> None:
        self.auth = auth
        self._token = FileSecret(auth.bearer_token_file, "--prometheus-bearer-token-file") \
            if auth.bearer_token_file else None
        self._password = FileSecret(auth.password_file, "--prometheus-password-file", "\r\n") \
            if auth.password_file else None

    def headers(self) -> list[tuple[str, str]]:
        out = list(self.auth.headers)
        if self._token is not None:
            out.append(("Authorization", f"Bearer {self._token.value()}"))
        if self._password is not None:
            out.append(("Authorization", basic_auth(self.auth.username or "", self._password.value())))
        return out

    def check(self) -> None:
        """Read every secret once (at start: a missing file is a start-up error, not a failed refresh)."""
        self.headers()

    def redact(self, text: str) -> str:
        secrets = []
        if self._token is not None:
            secrets += self._token.seen
        if self._password is not None:
            secrets += self._password.seen
            secrets += [basic_token(self.auth.username or "", p) for p in self._password.seen]
        for secret in sorted(secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return redact_url(text)


def ssl_context(auth: PromAuth) -> ssl.SSLContext | None:
    """None: aiohttp's default (verify against the system's CAs)."""
    if not auth.tls_options:
        return None
    try:
        ctx = ssl.create_default_context(cafile=auth.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--prometheus-ca-file {auth.ca_file}: {getattr(exc, 'strerror', None) or exc}") from None
    if auth.insecure_skip_verify:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if auth.cert_file:
        try:
            ctx.load_cert_chain(auth.cert_file, auth.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--prometheus-cert-file {auth.cert_file} / --prometheus-key-file {auth.key_file}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
    return ctx


def _middleware(credentials: Credentials, base_url: str):
    origin = URL(base_url).origin()
    hint = ("check " + credentials.auth.describe()) if credentials.auth != PromAuth() else \
        "it wants credentials: --prometheus-bearer-token-file, or --prometheus-username and --prometheus-password-file"

    async def add_credentials(req: aiohttp.ClientRequest, handler):
        if req.url.origin() != origin:   # a redirect elsewhere gets no credentials
            return await handler(req)
        for name, value in credentials.headers():
            req.headers[name] = value
        resp = await handler(req)
        if resp.status in (401, 403):   # never a query error in the Prometheus API: said plainly, before any decoding
            body = (await resp.content.read(200)).decode(errors="replace")
            resp.close()
            raise Refused(f"HTTP {resp.status} {resp.reason}: {' '.join(body.split())!r}; {hint}")
        return resp

    return add_credentials


def check_credentials(auth: PromAuth) -> None:
    """ValueError (naming the flag and file) unless every file ``auth`` names can be read and used: run at
    start, so a typo is an exit code, not a failed refresh."""
    Credentials(auth).check()
    ssl_context(auth)


def accept_encoding(gzip: bool) -> dict[str, str]:
    """The request header that asks for plain answers, or gzip ones. Prometheus compresses every answer a
    client accepts compressed, and for the analytics' matrices that costs it more than the queries
    themselves (the figures: docs/architecture.md, the analytics' queries)."""
    return {"Accept-Encoding": "gzip" if gzip else "identity"}


def open_session(base_url: str, auth: PromAuth, credentials: Credentials | None = None,
                 user_agent: str = f"lockstep/{VERSION}") -> aiohttp.ClientSession:
    """``async with open_session(url, auth) as session``; raises ValueError for unreadable TLS files and
    ``CredentialsError`` for unreadable secret files, before any request."""
    credentials = credentials or Credentials(auth)
    credentials.check()
    if URL(base_url).scheme == "http" and (auth.bearer_token_file or auth.password_file):
        log.warning("credentials sent to Prometheus over plain http", extra=kv(url=base_url))
    ctx = ssl_context(auth)
    connector = aiohttp.TCPConnector(ssl=ctx) if ctx is not None else None
    return aiohttp.ClientSession(connector=connector, headers={"User-Agent": user_agent, **accept_encoding(auth.gzip)},
                                 middlewares=(_middleware(credentials, base_url),))
