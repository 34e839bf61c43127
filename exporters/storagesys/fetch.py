"""The HTTP side of a poll: one GET of a target's endpoint, within the caller's deadline, its body read up
to a bound (``read_body``, which WEKA's JSON-RPC calls share). The bearer token or the basic-auth password goes in
a header and nowhere else (not in an error, not in a log)."""
from __future__ import annotations

import ssl

import aiohttp

from lockstep.exporters.storagesys.config import Target
from lockstep.exporters.storagesys.errors import AnswerError, HttpStatusError, PollError


def ssl_context(target: Target) -> ssl.SSLContext | bool:
    if not target.url.startswith("https:"):
        return True  # plain http: aiohttp's default, unused
    if not target.tls_verify:
        return False
    return ssl.create_default_context(cafile=target.ca_file) if target.ca_file else True


async def read_body(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The whole body of ``resp``, or an ``AnswerError`` once it passes ``max_bytes``."""
    # read(n) returns what has arrived, up to n, not n: an answer longer than one socket read
    # (asyncio's transports read 256 KiB at a time) is read chunk by chunk to its end.
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 20):
        size += len(chunk)
        if size > max_bytes:
            raise AnswerError(f"answer larger than {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def get_text(session: aiohttp.ClientSession, target: Target, path: str, tls: ssl.SSLContext | bool,
                   max_bytes: int) -> str:
    headers = {"Accept": "text/plain;version=0.0.4"}
    if target.bearer_token is not None:
        headers["Authorization"] = f"Bearer {target.bearer_token}"
    elif target.basic_auth is not None:
        headers["Authorization"] = target.basic_auth.basic_header()
    try:
        async with session.get(target.url + path, headers=headers, ssl=tls, allow_redirects=False) as resp:
            if resp.status != 200:
                raise HttpStatusError(f"HTTP {resp.status} from {path}")
            body = await read_body(resp, max_bytes)
    except aiohttp.ClientError as exc:
        raise PollError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise AnswerError("answer is not UTF-8 text") from None
