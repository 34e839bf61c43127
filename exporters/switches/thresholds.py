"""The link-health thresholds, each with its source. Everything ``linkhealth`` decides comes from here.

- Bit-error budget: a compliant InfiniBand link keeps its bit error rate below 10^-12 (IBTA; ibdiagnet's
  BER test uses 10^-12 as its default threshold: NVIDIA IBUtils2 documentation, "Bit Error Rate (BER)",
  https://docs.nvidia.com/networking/display/ibdiagnetutilityv2230/bit+error+rate+(ber)). A port whose
  SymbolErrorCounter rises by more than ``BER × link rate × window`` within a window is over budget. Each
  symbol error is counted as one bit error, the least it can be, so the test never over-reports.
- Windows: 12 and 125 minutes, the two windows of UFM's packet-drop-rate rules (as issue-level
  requirement; the short window catches a bad cable fast, the long one keeps a slow leak in view after a
  burst ends).
- Fatal counters: NVSentinel's NIC health monitor (NVIDIA/NVSentinel, docs/nic-health-monitor/
  link-counter-detection.md, "Deterministic Failure Mechanisms") treats any increase of link_downed,
  excessive_buffer_overrun_errors and local_link_integrity_errors as fatal, and link_error_recovery above
  5 per minute as degradation.
- Rate below capability: the port's active width × speed below the rate configured as expected
  (``--link.expected-width``/``--link.expected-speed``), as the node agent's ``--infiniband.expected-rate``.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    ber_budget: float = 1e-12
    short_window_s: float = 12 * 60
    long_window_s: float = 125 * 60
    fatal_window_s: float = 12 * 60               # a fatal counter's move keeps the port failed this long
    link_error_recovery_per_minute: float = 5.0


DEFAULT = Thresholds()
