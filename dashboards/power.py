"""Power & capacity: rack power against its breaker budget and the headroom left, PDU energy,
coolant temperatures, server and GPU power, and GPU-hours allocated, productive and lost this month
(the month-to-date panels override the time range with ``now/M``)."""
from __future__ import annotations

from lockstep.alerts import recording as r
from lockstep.dashboards import panels as p
from lockstep.dashboards.config import Config, range_total, rate, sel
from lockstep.dashboards.grafana import dashboard, target
from lockstep.exporters.catalog import analytics, gpu
from lockstep.exporters.catalog import power as pw

NAME = "power"
MONTH = "now/M"
GPU_HOURS = "suffix: GPU-h"


def _racks(cfg: Config) -> list:
    s = cfg.selectors.power
    rack_power, budget = r.RACK_POWER, f"max by (rack) ({sel(pw.RACK_BUDGET, s)})"
    return [
        p.timeseries("Rack power vs breaker budget", [target(rack_power, "{{rack}}"),
                                                      target(budget, "{{rack}} budget")], "watt", w=12),
        p.bargauge("Rack headroom", [target(f"{budget} - {rack_power}", "{{rack}}")], "watt", w=12,
                   thresholds=(("red", None), ("orange", 3000), ("green", 6000))),
        p.timeseries("PDU power", [target(sel(pw.PDU_POWER, s), "{{pdu}} ({{rack}})")], "watt", w=8),
        p.stat("PDU energy (range)", [target(f"{range_total(cfg, f'sum({rate(cfg, pw.PDU_ENERGY, s)})')} / 3.6e6")],
               "kwatth", w=4, h=8),
        p.timeseries("Coolant temperature", [target(sel(pw.COOLANT_TEMPERATURE, s), "{{target}} {{loop}}")],
                     "celsius", w=12),
        p.timeseries("Server input power (BMC)", [target(sel(pw.CHASSIS_POWER, s), "{{target}}")], "watt", w=12),
        p.timeseries("GPU power, fleet", [target(f"sum({sel(gpu.POWER, cfg.selectors.node)})", "GPUs"),
                                          target(f"sum({sel(gpu.POWER_LIMIT, cfg.selectors.node)})", "GPU limits")],
                     "watt", w=12),
    ]


def _gpu_hours(cfg: Config) -> list:
    # One accounting for all three: the analytics service's allocated and lost GPU-second counters.
    a = cfg.selectors.analytics
    allocated = range_total(cfg, f"sum({rate(cfg, analytics.JOB_ALLOCATED_GPU_SECONDS, a)})") + " / 3600"
    lost = range_total(cfg, f"sum({rate(cfg, analytics.JOB_LOST_GPU_SECONDS, a)})") + " / 3600"
    by_cause = range_total(cfg, f"sum by (cause) ({rate(cfg, analytics.JOB_LOST_GPU_SECONDS, a)})")
    month = {"timeFrom": MONTH}
    return [
        p.stat("GPU-hours allocated (month to date)", [target(allocated)], GPU_HOURS, w=6, **month),
        p.stat("GPU-hours productive (month to date)", [target(f"({allocated}) - ({lost})")], GPU_HOURS, w=6, **month),
        p.stat("GPU-hours lost (month to date)", [target(lost)], GPU_HOURS, w=6, **month),
        p.bargauge("Lost GPU-hours by cause (month to date)", [target(f"{by_cause} / 3600", "{{cause}}")], GPU_HOURS,
                   w=6, h=4, **month),
    ]


def build(cfg: Config):
    return dashboard(cfg, NAME, "lockstep / Power & capacity",
                     "Rack power against budget, PDU energy, cooling, and GPU-hours allocated, productive and lost.",
                     [*_gpu_hours(cfg), *_racks(cfg)])
