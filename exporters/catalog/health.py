"""Exporter self-health metrics, emitted by the core for every collector on every scrape."""
from lockstep.exporters.catalog.model import gauge

SCRAPE_COLLECTOR_SUCCESS = gauge(
    "lockstep_scrape_collector_success",
    "1 if the collector finished its last scrape without raising, 0 if it failed.",
    ("collector",))
SCRAPE_COLLECTOR_DURATION = gauge(
    "lockstep_scrape_collector_duration_seconds",
    "Wall-clock time the collector took in the last scrape.", ("collector",), "seconds")
EXPORTER_BUILD_INFO = gauge(
    "lockstep_exporter_build_info", "Always 1; the lockstep version serving this endpoint.",
    ("version", "component"))
NODE_INFO = gauge(
    "lockstep_node_info", "Always 1; the node name this agent reports for (node_exporter's uname nodename). Prometheus "
    "target labels carry `node`; this joins an unlabelled target to its node.", ("nodename",))

METRICS = (SCRAPE_COLLECTOR_SUCCESS, SCRAPE_COLLECTOR_DURATION, EXPORTER_BUILD_INFO, NODE_INFO)
