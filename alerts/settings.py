"""The one config every rule, recording rule and route is a function of (the mixin convention), as
plain frozen data with its defaults. ``lockstep.alerts.config.load`` reads a site's YAML file into it;
the rule modules import only this module, so the loader may check a file against the rules it knows."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from lockstep.alerts.model import Alert
from lockstep.exporters.catalog.selectors import DEFAULT as DEFAULT_SELECTORS
from lockstep.exporters.catalog.selectors import Selectors


@dataclass(frozen=True)
class Thresholds:
    pfc_paused_ratio: float = 0.2           # fraction of wall time a priority spends paused
    pfc_window: str = "1m"
    ib_flaps: float = 2                     # link_downed increments within ib_flap_window
    ib_flap_window: str = "15m"
    ib_symbol_errors: float = 10            # symbol errors within ib_symbol_window
    ib_symbol_window: str = "10m"
    # An HCA's node description as the fabric exporter's `name`/`remote_name` labels carry it, read as
    # `<host> <device>`: rdma-core's rdma-ndd writes "%h %d" by default (hostname, then the RDMA device).
    # Prometheus anchors the regex; a description that does not match names no node (nothing to drain).
    fabric_ca_description: str = r"(\S+)\s+(\S+)"
    # A job's rail carrying this many times the mean bytes of the job's rails over rail_imbalance_window
    # (max/mean: 1 is an even spread; on 8 rails one rail at twice the others' bytes is 1.78), while the job
    # moves at least rail_imbalance_min_bytes_per_second per rail on average (an idle job is not imbalanced).
    rail_imbalance_factor: float = 1.5
    rail_imbalance_window: str = "10m"
    rail_imbalance_min_bytes_per_second: float = 1e8
    gpu_event_window: str = "10m"           # XID / ECC increase window (which XIDs page: the XID catalog's severity)
    # The analytics service scores no straggler while the whole job is stalled (every rank waits), so a
    # straggler vanishes during each stall; hold its alert through them instead of resolving/re-firing.
    straggler_keep_firing_for: str = "10m"
    # A hang localised to its ranks pages for a job on at least this many GPUs (so many GPUs wait for one
    # rank that a human should come now); a smaller job's is a ticket.
    rank_hung_page_gpus: float = 64
    # An NVMe drive with this share of its rated endurance used (SMART Percentage Used) is due for replacement
    # planning; spare at or below the drive's own threshold fires regardless.
    nvme_wear_ratio: float = 0.8
    # A GPFS waiter (mmdiag --waiters) older than this: the client's I/O is stuck long enough that the job on it
    # waits visibly (60 s: a step or checkpoint stalled).
    gpfs_waiter_seconds: float = 60.0
    checkpoint_lost_ratio: float = 0.1      # checkpoint-stalled share of allocated GPU time
    checkpoint_window: str = "1h"
    checkpoint_slow_factor: float = 2.0     # a checkpoint this many times the job's mean of its earlier ones
    checkpoint_slow_min_history: int = 3    # ...once the job has counted at least this many before it
    storage_latency_seconds: float = 0.25   # a storage system's mean latency per operation, by bucket/fs/view
    storage_latency_window: str = "5m"
    rack_power_budget_ratio: float = 0.9
    coolant_supply_celsius: float = 45.0    # ASHRAE W45 class: facility water supply up to 45 °C
    # Rack-side supply loops (a regex): `supply`, another connector `rack2_supply`, another CDU of the same
    # service `2/supply` (exporters/power/cdu.py); not the facility side (`facility_supply`).
    coolant_loop: str = r"([^/]+/)?(rack[^_]*_)?supply"
    # A validation figure below this fraction of a baseline is a regression (0.8: 20 % below).
    validation_regression_ratio: float = 0.8
    validation_min_peers: float = 3         # nodes of a model needed for a peer baseline
    # A failed diagnostic or timed-out run pages only while it is this recent (a burn-in failure from
    # last month is history, not news).
    validation_failed_max_age_seconds: float = 86400.0
    # Which nodes are in service (PromQL with a `node` label); empty: nodes whose agent is up. A site with
    # a Slurm exporter can name its node states instead.
    validation_in_service: str = ""


@dataclass(frozen=True)
class Floor:
    """An expected hardware figure: validation figures matching ``match`` (label matchers, without braces)
    should reach ``min`` (base units: bytes/s, operations/s)."""

    match: str
    min: float


@dataclass(frozen=True)
class Routing:
    """Alertmanager receivers; URLs are placeholders to be set per site."""

    pager_webhook_url: str = "http://pager.invalid/lockstep"
    pagerduty_routing_key_file: str = ""    # set to add a PagerDuty integration to the pager receiver
    queue_webhook_url: str = "http://queue.invalid/lockstep"
    quarantine_webhook_url: str = ""        # set to send hardware faults to `lockstep alerts quarantine-receiver`
    quarantine_bearer_token_file: str = ""
    # Send resolved notifications too: needed by a receiver run with --return-when-resolved.
    quarantine_send_resolved: bool = False
    group_wait: str = "30s"
    pager_group_wait: str = "10s"           # pages go out faster than tickets
    group_interval: str = "5m"
    repeat_interval: str = "4h"


@dataclass(frozen=True)
class AlertsConfig:
    selectors: Selectors = DEFAULT_SELECTORS
    thresholds: Thresholds = Thresholds()
    routing: Routing = Routing()
    for_: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))   # alert name → its for:
    runbook_base_url: str = "https://github.com/lockstep-telemetry/lockstep/blob/main/docs/runbooks"
    validation_floors: tuple[Floor, ...] = ()
    # With 5 s scrapes a storm crosses the 20 % of the 1 m window in ~15 s; +15 s evaluation, +30 s for,
    # +10 s pager group_wait: paged in about a minute, inside the 90 s budget (docs/architecture.md).
    evaluation_interval: str = "15s"
    # The analytics' --step (the node agents' scrape interval): the inputs it reads are recorded at it.
    analytics_step: str = "5s"

    def for_of(self, alert: Alert) -> str:
        """The alert's ``for:``: the site's override, else its own definition's."""
        return self.for_.get(alert.name, alert.for_)
