"""GPU node (variables ``node``, the node-agent target label, and ``instance``, its scrape target):
the agent's verdict per GPU and its failing checks, GPUs visible against expected, per-GPU clocks
against their maximum, clock-event reasons, temperatures, power against the limit, memory errors,
XIDs by the XID catalog's severity and action, PCIe and NVLink errors, the validation checks
(P2P, PCIe link width, persistence, ECC mode) and the node's latest cluster validation runs."""
from __future__ import annotations

from lockstep.dashboards import panels as p
from lockstep.dashboards import queries as q
from lockstep.dashboards import validation
from lockstep.dashboards.config import Config, rate, sel
from lockstep.dashboards.grafana import dashboard, query_variable, target
from lockstep.exporters.catalog import gpu
from lockstep.exporters.catalog.enums import HEALTH_FAILED, HEALTH_OK, HEALTH_WARNING, IDLE_REASON

NAME = "node"
GPU = "GPU {{gpu}}"
NOT_IDLE = f'reason!="{IDLE_REASON}"'
# nvmlGpuP2PStatus_t, as the catalog's HELP of lockstep_gpu_p2p_status documents it.
P2P_STATES = {"0": ("ok", "green"), "1": ("chipset not supported", "red"), "2": ("GPU not supported", "red"),
              "3": ("topology not supported (ACS?)", "red"), "4": ("disabled by regkey", "red"),
              "5": ("not supported", "red"), "6": ("unknown", "orange")}


def _verdict(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE, q.INSTANCE)
    return [
        p.state_timeline("GPU verdict", [target(sel(gpu.HEALTHY, *n), GPU)], "none",
                         states={"0": ("a check failed", "red"), "1": ("healthy", "green")}, w=10),
        p.state_timeline("Checks not ok", [target(f"{sel(gpu.HEALTH, *n)} > {HEALTH_OK}", "GPU {{gpu}} {{check}}")],
                         "none", states={str(HEALTH_WARNING): ("warning", "orange"),
                                         str(HEALTH_FAILED): ("failed", "red")}, w=10),
        p.stat("GPUs visible / expected", [target(f"sum({sel(gpu.GPUS_VISIBLE, *n)})", "visible"),
                                          target(f"sum({sel(gpu.GPUS_EXPECTED, *n)})", "expected")], "short", w=4),
    ]


def _clocks_and_thermals(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE, q.INSTANCE)
    reasons = f"{sel(gpu.CLOCK_EVENT, *n, NOT_IDLE)} == 1"
    return [
        p.timeseries("SM clock vs max", [target(sel(gpu.SM_CLOCK, *n), GPU),
                                         target(f"max({sel(gpu.SM_CLOCK_MAX, *n)})", "max")], "hertz", w=12),
        p.state_timeline("Clock-event reasons", [target(reasons, "GPU {{gpu}} {{reason}}")], "none",
                         states={"1": ("active", "orange")}, w=12),
        p.timeseries("GPU temperature", [target(sel(gpu.TEMPERATURE, *n), GPU)], "celsius", w=8),
        p.timeseries("HBM temperature", [target(sel(gpu.MEMORY_TEMPERATURE, *n), GPU)], "celsius", w=8),
        p.timeseries("Power vs limit", [target(f"{sel(gpu.POWER, *n)} / {sel(gpu.POWER_LIMIT, *n)}", GPU)],
                     "percentunit", min=0, max=1, w=8),
        p.timeseries("Power", [target(sel(gpu.POWER, *n), GPU),
                               target(f"max({sel(gpu.POWER_LIMIT, *n)})", "limit")], "watt", w=12),
        p.state_timeline("GPU answering NVML", [target(sel(gpu.UP, *n), GPU)], "none",
                         states={"0": ("lost", "red"), "1": ("up", "green")}, w=12),
    ]


def _errors(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE, q.INSTANCE)
    return [
        p.timeseries("ECC errors", [target(f"sum by (gpu, type) ({rate(cfg, gpu.ECC_ERRORS, *n)})",
                                           "GPU {{gpu}} {{type}}")], "cps", w=8),
        p.table("Remapped rows", [target(sel(gpu.REMAPPED_ROWS, *n), instant=True, table=True)], "short",
                columns={"gpu": "gpu", "state": "state", "Value": "rows / flag"}, w=8),
        p.table("XID errors since driver load",
                [target(f"sum by (gpu, xid, severity, category, action) ({sel(gpu.XID_ERRORS, *n)})",
                        instant=True, table=True)], "short",
                columns={"gpu": "gpu", "xid": "xid", "severity": "severity", "category": "category",
                         "action": "NVIDIA's action", "Value": "count"}, w=8),
        p.timeseries("XID rate", [target(f"sum by (gpu, xid) ({rate(cfg, gpu.XID_ERRORS, *n)})",
                                         "GPU {{gpu}} XID {{xid}}")], "cps", bars=True, w=8),
        p.timeseries("PCIe replays", [target(rate(cfg, gpu.PCIE_REPLAY, *n), GPU)], "cps", w=8),
        p.timeseries("NVLink errors", [target(f"sum by (gpu, type) ({rate(cfg, gpu.NVLINK_ERRORS, *n)})",
                                              "GPU {{gpu}} {{type}}")], "cps", w=8),
    ]


def _validation(cfg: Config) -> list:
    n = (cfg.selectors.node, q.NODE, q.INSTANCE)
    checks = p.table("Validation checks per GPU", [
        target(f"{sel(gpu.PCIE_WIDTH, *n)} / {sel(gpu.PCIE_WIDTH_MAX, *n)}", instant=True, table=True),
        target(f"{sel(gpu.PCIE_GEN, *n)} / {sel(gpu.PCIE_GEN_MAX, *n)}", instant=True, table=True),
        target(sel(gpu.PERSISTENCE_MODE, *n), instant=True, table=True),
        target(sel(gpu.ECC_ENABLED, *n), instant=True, table=True),
        target(f"sum by (node, instance, job, gpu) ({sel(gpu.P2P_STATUS, *n)} != bool 0)", instant=True, table=True),
    ], "short", columns={"gpu": "gpu", "Value #A": "PCIe width / max", "Value #B": "PCIe gen / max",
                         "Value #C": "persistence", "Value #D": "ECC on", "Value #E": "P2P peers not ok"}, w=12, h=9)
    p2p = p.state_timeline("P2P status to each peer", [target(sel(gpu.P2P_STATUS, *n), "GPU {{gpu}} → {{peer}}")],
                           "none", states=P2P_STATES, w=12, h=9)
    # cluster validation runs of this node (lockstep validate): status and age of each test's latest run
    return [checks, p2p, validation.runs(cfg, q.NODE, q.INSTANCE)]


def build(cfg: Config):
    node = query_variable("node", "Node", f"label_values({sel(gpu.INFO, cfg.selectors.node)}, node)")
    # The node agent target(s) of that node: one, unless two agents (or scrape jobs) report the same node.
    instance = query_variable("instance", "Instance",
                              f"label_values({sel(gpu.INFO, cfg.selectors.node, q.NODE)}, instance)", include_all=True)
    panels = [*_verdict(cfg), *_clocks_and_thermals(cfg), *_errors(cfg), *_validation(cfg)]
    return dashboard(cfg, NAME, "lockstep / GPU node",
                     "One node's GPUs: the agent's verdict and failing checks, clocks and clock-event reasons, "
                     "thermals, power, memory errors, XIDs, PCIe and NVLink errors, validation checks.",
                     panels, [node, instance])
