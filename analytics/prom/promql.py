"""PromQL built from values we do not control (job ids come from Slurm, from Kubernetes labels and
from HTTP paths).

A job id is validated against a conservative pattern and *also* escaped as a PromQL string, so a
crafted id can neither close the string nor add a matcher or an operator to the query.
"""
from __future__ import annotations

import re

from lockstep.exporters.catalog import analytics, gpu
from lockstep.exporters.catalog.selectors import DEFAULT as SELECTORS

# Slurm ids: 4242, array tasks 4242_7, heterogeneous components 4242+0; schedulers elsewhere use
# names with dots, dashes and colons. Kubernetes jobs are <namespace>/<name>: the namespace a DNS-1123
# label (lower-case alphanumerics and "-", at most 63), the name an object name (DNS-1123 subdomain,
# at most 253) or a label value (letters, digits, "-", "_", "."). Nothing here can end a string or start
# a new matcher; the "/" is the only character a Slurm id lacks, and it means nothing in PromQL strings.
SLURM_JOB_ID = r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}"
KUBE_JOB_ID = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?"
JOB_ID = re.compile(f"{SLURM_JOB_ID}|{KUBE_JOB_ID}")   # use fullmatch: "$" would allow a trailing \n


class InvalidJobId(ValueError):
    pass


def validate_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise InvalidJobId(f"invalid job id {job_id!r}: want 1-128 of [A-Za-z0-9_.:+-] starting alphanumeric, "
                           "or <namespace>/<name> with Kubernetes' name rules")
    return job_id


def quote(value: str) -> str:
    """A PromQL double-quoted string literal (Go escaping rules) holding exactly ``value``."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


_REGEX_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def alternatives(values) -> str:
    """An RE2 regex matching exactly each of ``values`` (``node=~``; put it in ``quote``). None: matches
    nothing (``a^`` can never match)."""
    return "|".join(_REGEX_SPECIAL.sub(r"\\\1", v) for v in sorted(set(values))) or "a^"


def job_selector(job_id: str) -> str:
    """``lockstep_gpu_job_info{<node selector>,job_id="..."}`` for a validated id."""
    return with_job(gpu.JOB_INFO.name, job_id)


def with_job(metric: str, job_id: str) -> str:
    """``metric{<its job's selector>,job_id="..."}`` for a validated id (metrics that carry job_id themselves)."""
    return selector(metric, f"job_id={quote(validate_job_id(job_id))}")


def selector(metric: str, extra: str = "") -> str:
    """``metric{<the selector of the scrape job serving it>,<extra>}``."""
    return f"{metric}{{{_matchers(metric, extra)}}}"


def _matchers(metric: str, extra: str) -> str:
    """The selector of the scrape job serving ``metric`` (the training job's own step times, or a node
    agent), then ``extra``."""
    served_by = SELECTORS.training if metric == analytics.RANK_STEP_SECONDS.name else SELECTORS.node
    return ",".join(m for m in (served_by, extra) if m)


JOBS_QUERY = f"count by (job_id) ({gpu.JOB_INFO.name}{{{SELECTORS.node}}})"


def jobs_within(range_s: float) -> str:
    """Every job id on ``lockstep_gpu_job_info`` at any time in the ``range_s`` before the evaluation time."""
    return f"count by (job_id) (last_over_time({gpu.JOB_INFO.name}{{{SELECTORS.node}}}[{round(range_s * 1000)}ms]))"
