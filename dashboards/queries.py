"""Query fragments more than one dashboard uses: joins to a job's GPUs and nodes, to rails, and
the GPU states the overview counts. Each is a function of the ``Config``.

Joins follow the conventions: ``node`` is a Prometheus target label on every node-agent series,
``lockstep_gpu_job_info`` maps (node, gpu) to ``job_id``, and ``lockstep_fabric_rail_info`` maps
(node, device) and (node, interface) to ``rail``.
"""
from __future__ import annotations

from lockstep.dashboards.config import Config, sel
from lockstep.exporters.catalog import fabric, gpu
from lockstep.exporters.catalog.enums import THROTTLE_REASONS

JOB = 'job_id="$job_id"'
NODE = 'node=~"$node"'
INSTANCE = 'instance=~"$instance"'   # the node agent's scrape target, on the GPU node dashboard
RAIL = 'rail=~"$rail"'


def throttle_matcher() -> str:
    return f'reason=~"{"|".join(THROTTLE_REASONS)}"'


def job_gpus(cfg: Config, expr: str) -> str:
    """Restrict a per-GPU expression to the GPUs of ``$job_id`` (and add the ``job_id`` label). One GPU can
    carry several mapping series of one job (MIG devices, time-sliced pods): ``max by`` makes them one."""
    gpus = f"max by (node, gpu, job_id) ({sel(gpu.JOB_INFO, cfg.selectors.node, JOB)})"
    return f"({expr}) * on(node, gpu) group_left(job_id) {gpus}"


def job_nodes(cfg: Config, expr: str) -> str:
    """Restrict a per-node expression (ports, mounts) to the nodes ``$job_id`` runs on."""
    nodes = f"max by (node, job_id) ({sel(gpu.JOB_INFO, cfg.selectors.node, JOB)})"
    return f"({expr}) * on(node) group_left(job_id) {nodes}"


def by_device_rail(cfg: Config, expr: str, *rail_matchers: str) -> str:
    """Add ``rail`` to a per-port (device) expression."""
    return f"({expr}) * on(node, device) group_left(rail) {sel(fabric.RAIL_INFO, cfg.selectors.node, *rail_matchers)}"


def by_interface_rail(cfg: Config, expr: str, *rail_matchers: str) -> str:
    """Add ``rail`` to a per-interface (PFC) expression. Devices without a netdev have an empty
    interface on the info metric; they would make the match ambiguous, so they are left out."""
    info = sel(fabric.RAIL_INFO, cfg.selectors.node, 'interface!=""', *rail_matchers)
    return f"({expr}) * on(node, interface) group_left(rail) {info}"


def gpus_throttled(cfg: Config, *matchers: str) -> str:
    events = sel(gpu.CLOCK_EVENT, cfg.selectors.node, throttle_matcher(), *matchers)
    return f"max by (node, gpu) ({events}) == 1"


def gpus_healthy(cfg: Config) -> str:
    """GPUs answering NVML with no throttling reason active."""
    return f"{sel(gpu.UP, cfg.selectors.node)} == 1 unless on(node, gpu) ({gpus_throttled(cfg)})"


def count_or_zero(expr: str) -> str:
    """``count`` that shows 0, not "No data", when nothing matches (the query test strips the
    fallback to check the counted series exist in the scenario that exercises the panel)."""
    return f"count({expr}) or vector(0)"
