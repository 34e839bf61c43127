"""The peer-relative health's inputs: one instant query per feature over the whole fleet, reduced in
the TSDB to one value per GPU (``node, gpu``): the median, over the window's samples while the GPU was
loaded, of a ratio that makes GPUs at different activity comparable. ``lockstep.analytics.scoring.peers``
names the features; ``lockstep.analytics.evaluation.fleet`` computes the same values from a simulated
fleet. The peer groups come from ``lockstep_gpu_info`` (model ``name`` and ``driver_version``).
"""
from __future__ import annotations

from lockstep.analytics.prom.promql import selector
from lockstep.exporters.catalog import gpu
from lockstep.exporters.catalog.recorded import (
    FLEET_INPUTS,
    FLEET_INPUTS_STEP,
    FLEET_LOADED,
    FLEET_LOADED_UTILIZATION,
    FLEET_POWER_CAPPED,
    FLEET_STEP_S,
)

WINDOW_S = 900.0             # the features of a refresh: the 15 minutes before it
STEP_S = FLEET_STEP_S        # the subquery's resolution, and the recording rules' interval
LOADED_UTILIZATION = FLEET_LOADED_UTILIZATION   # a sample counts while the GPU was at least this busy
POWER_CAPPED = FLEET_POWER_CAPPED   # at this share of its power limit a GPU's clock gives way by design
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


def _recorded_range() -> str:
    return f"[{int(WINDOW_S) - 1}s]"


def loaded_inputs() -> dict[str, str]:
    """Feature name → its per-GPU value at one instant while the GPU is loaded (absent otherwise): what the
    subquery of ``queries`` evaluates at each step, and what the recording rules (``FLEET_INPUTS``; written by
    ``lockstep.alerts.recording.fleet_inputs``, held to these by a test) record."""
    return {name: f"({expr}) and on ({GPU_BY}) ({loaded()})" for name, expr in _expressions().items()}


def queries() -> dict[str, str]:
    """Feature name → instant query; a GPU loaded for fewer than ``MIN_LOADED_SAMPLES`` steps of the
    window has no answer."""
    enough = f"count_over_time(({loaded()}){_range()}) >= {MIN_LOADED_SAMPLES}"
    return {name: f"max by ({GPU_BY}) (quantile_over_time(0.5, ({expr}){_range()})) and on ({GPU_BY}) ({enough})"
            for name, expr in loaded_inputs().items()}


def recorded_queries() -> dict[str, str]:
    """``queries`` over the recorded inputs: the median of the minute samples the rules recorded in the window,
    read instead of evaluated (a running Prometheus's evaluations need not fall on the subquery's minutes)."""
    enough = f"count_over_time({FLEET_LOADED}{_recorded_range()}) >= {MIN_LOADED_SAMPLES}"
    return {name: f"max by ({GPU_BY}) (quantile_over_time(0.5, {FLEET_INPUTS[name]}{_recorded_range()})) "
                  f"and on ({GPU_BY}) ({enough})" for name in loaded_inputs()}


def recorded_coverage_query() -> str:
    """How many minutes of the window the recording group ran (``recorded_covers``)."""
    return f"max(count_over_time({FLEET_INPUTS_STEP}{_recorded_range()}))"


def recorded_covers(result: list[dict]) -> bool:
    """Whether the recording group ran through the whole window (one minute less: its evaluations need not fall
    on the window's minutes); the pass reads the recorded inputs only then."""
    try:
        return float(result[0]["value"][1]) >= WINDOW_S / STEP_S - 1
    except (IndexError, KeyError, TypeError, ValueError):
        return False


def info_query() -> str:
    """One series per GPU naming its model and driver."""
    return f"max by ({GPU_BY}, name, driver_version) ({selector(gpu.INFO.name)})"
