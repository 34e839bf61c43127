"""Alerts on cluster validation results (``lockstep validate``, served by the node agents' ``validation``
collector): a figure fallen below one of its baselines, and a failed or hung diagnostic on a node in service."""
from __future__ import annotations

from lockstep.alerts.model import Alert, metric
from lockstep.alerts.recording import VALIDATION_RATIO
from lockstep.alerts.settings import AlertsConfig
from lockstep.exporters.catalog.enums import PAGE, TICKET, VALIDATION_PAGING_KIND

RUN = "node, kind, test, scale"


def _in_service(config: AlertsConfig) -> str:
    return config.thresholds.validation_in_service or f"up{{{config.selectors.node}}} == 1"


def failed(config: AlertsConfig) -> str:
    """The failing part of each run: a DCGM check that failed (its test and GPU), a diagnostic that could not
    run, any run killed at its limit; of runs recent enough to be news, on nodes in service."""
    sel, t = config.selectors.node, config.thresholds
    check = metric("lockstep_validation_check_status", sel, f'kind="{VALIDATION_PAGING_KIND}",status="fail"')
    error = metric("lockstep_validation_status", sel, f'kind="{VALIDATION_PAGING_KIND}",status="error"')
    timeout = metric("lockstep_validation_status", sel, 'status="timeout"')
    last_run = metric("lockstep_validation_last_run_timestamp_seconds", sel)
    return (f"(\n  max by ({RUN}, check, subject, status) ({check})\n"
            f"  or max by ({RUN}, status) ({error})\n  or max by ({RUN}, status) ({timeout})\n)\n"
            f"and on ({RUN}) (time() - {last_run}) < {t.validation_failed_max_age_seconds:g}\n"
            f"and on (node) ({_in_service(config)})")


def alerts(config: AlertsConfig) -> list[Alert]:
    t = config.thresholds
    return [
        Alert("ValidationFailed", failed(config), PAGE,
              "{{ $labels.node }}: {{ $labels.kind }} {{ $labels.test }} {{ $labels.status }}"
              "{{ if $labels.check }} ({{ $labels.check }} {{ $labels.subject }}){{ end }}",
              "The latest {{ $labels.kind }} run {{ $labels.test }} on {{ $labels.node }}, a node in service, "
              "ended {{ $labels.status }}{{ if $labels.check }}: check {{ $labels.check }} failed on "
              "{{ $labels.subject }}{{ end }}. The node must take no more work until it passes again.", for_="0m"),
        Alert("ValidationRegression", f"{VALIDATION_RATIO} < {t.validation_regression_ratio:g}", TICKET,
              "{{ $labels.node }} {{ $labels.test }} {{ $labels.figure }} at {{ $value | humanizePercentage }} "
              "of its {{ $labels.baseline }} baseline",
              "The latest {{ $labels.kind }} run {{ $labels.test }} (scale {{ $labels.scale }}) on {{ $labels.node }}"
              " measured {{ $labels.figure }}{{ if $labels.subject }} of {{ $labels.subject }}{{ end }} at "
              "{{ $value | humanizePercentage }} of its {{ $labels.baseline }} baseline (threshold "
              f"{t.validation_regression_ratio:.0%}): the node is slower than it was, than its peers or than "
              "its hardware should be.", for_="10m"),
    ]
