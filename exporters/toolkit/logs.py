"""Logging in logfmt (node_exporter style) or JSON, configured once from flags."""
from __future__ import annotations

import json
import logging
import sys
import time
import weakref
from typing import Callable

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
_once: set[tuple[str, str]] = set()
_redactors: list[weakref.WeakMethod] = []   # e.g. Credentials.redact of a Prometheus client


def _quote(value: object) -> str:
    text = str(value)
    if text == "" or any(c in text for c in ' ="\n\t'):
        return json.dumps(text)
    return text


class _Logfmt(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        fields = {"ts": ts, "level": record.levelname.lower().replace("warning", "warn"),
                  "logger": record.name, "msg": record.getMessage()}
        fields.update(getattr(record, "fields", {}))
        if record.exc_info:
            fields["err"] = self.formatException(record.exc_info).splitlines()[-1]
        return " ".join(f"{k}={_quote(_redact(str(v)))}" for k, v in fields.items())


class _Json(_Logfmt):
    def format(self, record: logging.LogRecord) -> str:
        parts = {"ts": record.created, "level": record.levelname.lower(), "logger": record.name,
                 "msg": record.getMessage(), **getattr(record, "fields", {})}
        return json.dumps({k: v if v is None or isinstance(v, (int, float)) else _redact(str(v))
                           for k, v in parts.items()})


def redact_with(method: Callable[[str], str]) -> None:
    """Pass every logged value through ``method`` (a bound method, held weakly) to hide secrets."""
    _redactors[:] = [r for r in _redactors if r() is not None]
    _redactors.append(weakref.WeakMethod(method))


def _redact(line: str) -> str:
    for ref in _redactors:
        method = ref()
        if method is not None:
            line = method(line)
    return line


def add_flags(parser) -> None:
    """``--log.level`` and ``--log.format``, as every Prometheus exporter has them."""
    parser.add_argument("--log.level", dest="log.level", default="info", choices=list(LEVELS))
    parser.add_argument("--log.format", dest="log.format", default="logfmt", choices=["logfmt", "json"])


def setup_from_args(args) -> None:
    setup(getattr(args, "log.level"), getattr(args, "log.format"))


def setup(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Json() if fmt == "json" else _Logfmt())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[level])
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def kv(**fields: object) -> dict:
    """``log.info("msg", extra=kv(device="mlx5_0"))`` adds logfmt fields."""
    return {"fields": fields}


def once(logger: logging.Logger, level: int, key: str, msg: str, *args: object) -> None:
    """Log ``msg`` the first time ``key`` is seen for this logger (e.g. NotSupported fields)."""
    if (logger.name, key) not in _once:
        _once.add((logger.name, key))
        logger.log(level, msg, *args)
