"""One error type per way a poll of a storage system fails; its ``reason`` is the
``lockstep_storage_system_poll_failures_total{reason}`` label value."""
from __future__ import annotations


class PollError(Exception):
    reason = "connect"


class HttpStatusError(PollError):
    reason = "http"


class AnswerError(PollError):
    """The system answered, but not in its format (HTML from a proxy, a truncated body, another endpoint)."""

    reason = "parse"
