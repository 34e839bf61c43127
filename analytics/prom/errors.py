"""Errors of a query source: each fails the job whose query raised it, never the refresh of the others."""
from __future__ import annotations


class PrometheusError(RuntimeError):
    """Prometheus unreachable, slow, or answering with an error."""


class MalformedAnswer(PrometheusError):
    """An answer that is not a well-formed ``query_range`` matrix on the window's grid."""


class QueryTimeout(PrometheusError):
    """A query that did not finish within its timeout (the client's, or the store's own): asking for
    less at once may succeed where asking again for the same would not."""


class AnswerTooLarge(PrometheusError):
    """An answer past the size the service reads (``--prometheus-max-answer-size``): not read further."""
