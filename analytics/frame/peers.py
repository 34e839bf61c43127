"""The peer-relative health's inputs: one instant query per feature over the whole fleet, reduced in
the TSDB to one value per GPU (``node, gpu``): the median, over the window's samples while the GPU was
loaded, of a ratio that makes GPUs at different activity comparable. ``lockstep.analytics.scoring.peers``
names the features; ``lockstep.analytics.evaluation.fleet`` computes the same values from a simulated
fleet. The peer groups come from ``lockstep_gpu_info`` (model ``name`` and ``driver_version``).
"""
from __future__ import annotations

from lockstep.analytics.prom.promql import selector
from lockstep.exporters.catalog import gpu

WINDOW_S = 900.0             # the features of a refresh: the 15 minutes before it
STEP_S = 60.0                # the subquery's resolution
LOADED_UTILIZATION = 0.8     # a sample counts while the GPU was at least this busy
POWER_CAPPED = 0.95          # at this share of its power limit a GPU's clock gives way by design: not evidence
MIN_LOADED_SAMPLES = 5       # fewer loaded samples in the window: no value (an idle GPU is not judged)
GPU_BY = "node, gpu"


def _ratio(num: str, den: str) -> str:
    return f"{selector(num)} / ({selector(den)} > 0)"


def _expressions() -> dict[str, str]:
    sm_active = selector(gpu.SM_ACTIVE.name)
    temp = selector(gpu.TEMPERATURE.name)
    return {
        "sm_clock": f"({_ratio(gpu.SM_CLOCK.name, gpu.SM_CLOCK_MAX.name)}) and on ({GPU_BY}) "
                    f"({_ratio(gpu.POWER.name, gpu.POWER_LIMIT.name)} < {POWER_CAPPED})",
        "power": f"({_ratio(gpu.POWER.name, gpu.POWER_LIMIT.name)}) / ({sm_active} > 0)",
        # the raw inputs of the thermal feature, which the scoring derives across each node's GPUs
        "temperature_c": temp,
        "power_w": selector(gpu.POWER.name),
        # a generation doubles the per-lane rate (2.5, 5, 8, 16, 32 GT/s: close enough for a ratio)
        "pcie": f"({_ratio(gpu.PCIE_WIDTH.name, gpu.PCIE_WIDTH_MAX.name)}) * 2 ^ "
                f"({selector(gpu.PCIE_GEN.name)} - {selector(gpu.PCIE_GEN_MAX.name)})",
    }


def loaded() -> str:
    return f"{selector(gpu.UTILIZATION.name)} >= {LOADED_UTILIZATION}"


def _range() -> str:
    """``(T - WINDOW_S, T]``: a second short, so Prometheus 2 (ranges closed at both ends) and 3 (open at the
    start) take the same steps."""
    return f"[{int(WINDOW_S) - 1}s:{int(STEP_S)}s]"


def queries() -> dict[str, str]:
    """Feature name → instant query; a GPU loaded for fewer than ``MIN_LOADED_SAMPLES`` steps of the
    window has no answer."""
    enough = f"count_over_time(({loaded()}){_range()}) >= {MIN_LOADED_SAMPLES}"
    return {name: f"max by ({GPU_BY}) (quantile_over_time(0.5, (({expr}) and on ({GPU_BY}) ({loaded()})){_range()})) "
                  f"and on ({GPU_BY}) ({enough})"
            for name, expr in _expressions().items()}


def info_query() -> str:
    """One series per GPU naming its model and driver."""
    return f"max by ({GPU_BY}, name, driver_version) ({selector(gpu.INFO.name)})"
