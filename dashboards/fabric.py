"""Fabric (variables ``node`` and ``rail``, both multi-valued): per-port throughput against the
link rate, transmit wait, symbol errors, link downs and recoveries (flaps), degraded and inactive
ports, PFC pause frames and the fraction of time paused per priority, pause-storm events, ECN marks
and CNPs; the Ethernet switches' view of a storm (where it enters, the host behind it, the switch watchdog,
the spread). Everything on the hosts is labelled by rail through ``lockstep_fabric_rail_info``. The paused fraction
and the watchdog events are the recorded series PFCPauseStorm fires on, over its window."""
from __future__ import annotations

from lockstep.alerts import recording as r
from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards.config import Config, range_total, rate, sel
from lockstep.dashboards.grafana import dashboard, query_variable, target
from lockstep.exporters.catalog import fabric as f
from lockstep.exporters.catalog import gnmi as sw
from lockstep.exporters.catalog import switches as sw_ports
from lockstep.exporters.catalog.enums import IB_PORT_ACTIVE

NAME = "fabric"
PORT = "{{node}} {{device}} (rail {{rail}})"
IFACE = "{{node}} {{interface}} prio {{priority}} {{direction}} (rail {{rail}})"
HOST_PORT, RX, ON_A_RAIL = 'node!=""', 'direction="rx"', 'rail!=""'
STORM = "{{node}} {{interface}} {{level}} (rail {{rail}})"


def _ports(cfg: Config, metric, *extra: str) -> str:
    """Rate of a per-port counter on the selected nodes and rails, labelled by rail."""
    return q.by_device_rail(cfg, rate(cfg, metric, cfg.selectors.node, q.NODE, *extra), q.RAIL)


def _interfaces(cfg: Config, metric) -> str:
    return q.by_interface_rail(cfg, rate(cfg, metric, cfg.selectors.node, q.NODE), q.RAIL)


def _links(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE)
    utilisation = q.by_device_rail(cfg, f"({rate(cfg, f.IB_TRANSMIT_BYTES, *n)}) / {sel(f.IB_RATE, *n)}", q.RAIL)
    inactive = q.by_device_rail(cfg, f"{sel(f.IB_STATE, *n)} != {IB_PORT_ACTIVE}", q.RAIL)
    degraded = q.by_device_rail(cfg, f"{sel(f.IB_LINK_DEGRADED, *n)} == 1", q.RAIL)
    return [
        p.stat("Ports not active", [target(q.count_or_zero(inactive))], "short", thresholds=p.OK_BAD),
        p.stat("Links degraded", [target(q.count_or_zero(degraded))], "short", thresholds=p.OK_BAD),
        p.stat("Pause-storm events (range)",
               [target(range_total(cfg, f"sum({_interfaces(cfg, f.PFC_STORM_EVENTS)})"))], "short",
               thresholds=p.OK_BAD),
        p.timeseries("Throughput per rail", [
            target(f"sum by (rail) ({_ports(cfg, f.IB_TRANSMIT_BYTES)})", "tx rail {{rail}}"),
            target(f"-sum by (rail) ({_ports(cfg, f.IB_RECEIVE_BYTES)})", "rx rail {{rail}}"),
        ], "Bps", w=12),
        p.timeseries("Transmit utilisation per port (vs link rate)", [target(utilisation, PORT)], "percentunit",
                     min=0, max=1, w=12),
        p.timeseries("Transmit wait (no credits)", [target(_ports(cfg, f.IB_TRANSMIT_WAIT), PORT)], "cps", w=8),
        p.timeseries("Symbol errors", [target(_ports(cfg, f.IB_SYMBOL_ERRORS), PORT)], "cps", w=8),
        p.timeseries("Link downs and error recoveries (flaps)", [
            target(_ports(cfg, f.IB_LINK_DOWNED), "down " + PORT),
            target(_ports(cfg, f.IB_LINK_ERROR_RECOVERY), "recovery " + PORT),
        ], "cps", w=8),
    ]


def _congestion(cfg: Config) -> list:
    return [
        p.timeseries("PFC pause frames per priority",
                     [target(f"sum by (rail, priority, direction) ({_interfaces(cfg, f.PFC_PAUSE_FRAMES)})",
                             "rail {{rail}} prio {{priority}} {{direction}}")], "cps", w=12),
        p.timeseries("Fraction of time paused per priority",
                     [target(q.by_interface_rail(cfg, sel(r.PFC_PAUSED, q.NODE), q.RAIL), IFACE)],
                     "percentunit", min=0, max=1, w=12),
        p.timeseries("Pause-storm watchdog events (in the alert's window)",
                     [target(sel(r.PFC_STORM_EVENTS, q.NODE, q.RAIL), STORM)],
                     "short", w=8),
        p.timeseries("ECN-marked packets received", [
            target(f"sum by (rail) ({_ports(cfg, f.ROCE_ECN_MARKED)})", "rail {{rail}}")], "pps", w=8),
        p.timeseries("CNPs sent and handled", [
            target(f"sum by (rail) ({_ports(cfg, f.ROCE_CNP_SENT)})", "sent rail {{rail}}"),
            target(f"sum by (rail) ({_ports(cfg, f.ROCE_CNP_HANDLED)})", "handled rail {{rail}}"),
        ], "pps", w=8),
    ]


def _switches(cfg: Config) -> list:
    """The Ethernet switches' side of a storm (the switch exporter over gNMI): the ports their host pauses,
    where storms enter the fabric (the PFCPauseStorm page's origin), with the host from the neighbors map;
    the queues the switch's PFC watchdog holds; how far the pauses spread."""
    s = cfg.selectors.switch
    hosts = f"max by (switch, port, node, interface) ({sel(sw.NEIGHBOR_INFO, s, HOST_PORT)})"
    paused = rate(cfg, sw.PAUSE_DURATION, s)
    by_host = (f"max by (switch, port, priority, node, interface) (\n  {rate(cfg, sw.PAUSE_DURATION, s, RX)}"
               f"\n  * on (switch, port) group_left (node, interface) {hosts}\n) > 0")
    return [
        p.table("Switch ports paused by their host (storm origins)", [target(by_host, instant=True, table=True)],
                "percentunit", columns={"switch": "Switch", "port": "Port", "priority": "Priority", "node": "Host",
                                        "interface": "Interface", "Value": "Paused"}, sort_by="Paused", w=12),
        p.table("Queues the switch PFC watchdog holds as stormed",
                [target(f"{sel(sw.WATCHDOG_STORMED, s)} == 1", instant=True, table=True)], "short",
                columns={"switch": "Switch", "port": "Port", "queue": "Queue"}, w=12),
        p.timeseries("Switch ports paused per priority (the spread)",
                     [target(f"max by (switch, port, priority, direction) ({paused})",
                             "{{switch}} {{port}} prio {{priority}} {{direction}}")], "percentunit", min=0, max=1, w=24),
    ]


def _imbalance(cfg: Config) -> list:
    """Rail and uplink (ECMP) imbalance as FabricRailImbalance sees it: each rail's bytes over its job's mean
    rail and each leaf uplink's over its leaf's mean (1: an even spread), over the alert's window."""
    fab = cfg.selectors.fabric
    to_switch, to_host = 'kind="switch",remote_kind="switch"', 'kind="switch",remote_kind="ca"'
    leaf_uplinks = (f"max by (guid, port, name) ({sel(sw_ports.PORT_INFO, fab, to_switch)})\n"
                    f"  and on (guid) count by (guid) ({sel(sw_ports.PORT_INFO, fab, to_host)})")
    uplink_tx = (f"{rate(cfg, sw_ports.TRANSMIT_BYTES, fab)}\n* on (guid, port) group_left (name) (\n  {leaf_uplinks}\n)")
    # The recorded lockstep:job_rail_share:ratio, over the dashboard's rate interval.
    railed = f"max by (node, device, rail) ({sel(f.RAIL_INFO, cfg.selectors.node, ON_A_RAIL)})"
    per_rail = (f"sum by (job_id, rail) (\n  {rate(cfg, f.IB_TRANSMIT_BYTES, cfg.selectors.node)}\n"
                f"  * on (node, device) group_left (rail) {railed}\n  * on (node) group_left (job_id) {r.NODE_JOB}\n)")
    return [
        p.timeseries("Rail share of each job (bytes over the job's mean rail)",
                     [target(f"{per_rail}\n/ on (job_id) group_left avg by (job_id) ({per_rail})",
                             "job {{job_id}} rail {{rail}}")],
                     "short", min=0, w=12),
        p.timeseries("Leaf uplink imbalance (max over mean, ECMP)",
                     [target(f"max by (guid, name) ({uplink_tx})\n/ avg by (guid, name) ({uplink_tx})", "{{name}}")],
                     "short", min=0, w=12),
    ]


def build(cfg: Config):
    info = sel(f.RAIL_INFO, cfg.selectors.node)
    variables = [query_variable("node", "Node", f"label_values({info}, node)", include_all=True),
                 query_variable("rail", "Rail", f"label_values({info}, rail)", include_all=True)]
    return dashboard(cfg, NAME, "lockstep / Fabric",
                     "InfiniBand/RoCE ports by rail: throughput, waits, errors, flaps, PFC pauses and storms, "
                     "ECN and CNPs.", [*_links(cfg), *_congestion(cfg), *_imbalance(cfg), *_switches(cfg)], variables)
