"""The report's blocking client for the Prometheus HTTP API: the session every lockstep command uses to
talk to Prometheus, Thanos or Mimir (``lockstep.analytics.prom.session``: authentication, TLS, extra headers,
credentials re-read when they change), driven on a private event loop, as the report's code is
synchronous."""
from __future__ import annotations

import asyncio

import aiohttp

from lockstep.analytics.prom.answersize import REPORT_DEFAULT, read_answer
from lockstep.analytics.prom.auth import PromAuth
from lockstep.analytics.prom.errors import AnswerTooLarge, PrometheusError
from lockstep.analytics.prom.session import Refused, open_session


class PromClient:
    """``with PromClient(url, auth) as client: client.get(path, params, timeout) -> (status, body)``;
    PrometheusError when no answer came (unreachable, timed out, credentials refused) or it is larger than
    ``max_answer_bytes`` (decompressed; the error names the query)."""

    def __init__(self, url: str, auth: PromAuth | None = None, max_answer_bytes: int = REPORT_DEFAULT) -> None:
        self.url = url.rstrip("/")
        self.max_answer_bytes = max_answer_bytes
        self._loop = asyncio.new_event_loop()
        self._session = self._loop.run_until_complete(self._open(auth or PromAuth()))

    async def _open(self, auth: PromAuth) -> aiohttp.ClientSession:
        return open_session(self.url, auth)   # a ClientSession is made inside its loop

    def get(self, path: str, params: dict[str, str], timeout: float) -> tuple[int, bytes]:
        return self._loop.run_until_complete(self._get(path, params, timeout))

    async def _get(self, path: str, params: dict[str, str], timeout: float) -> tuple[int, bytes]:
        try:
            async with self._session.get(self.url + path, params=params,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return resp.status, await read_answer(resp, self.max_answer_bytes)
        except AnswerTooLarge as exc:
            raise PrometheusError(f"{self.url}{path}: query {params.get('query', '')[:300]!r}: {exc}") from None
        except Refused as exc:
            raise PrometheusError(f"{self.url}{path}: {exc}") from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        self._loop.run_until_complete(self._session.close())
        self._loop.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
