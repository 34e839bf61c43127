"""Scenario files (the contract format in docs/architecture.md), loaded strictly.

A bad scenario is rejected with ``FILE:LINE: field: reason`` (``lockstep.exporters.toolkit.configfile.ConfigError``)
before anything is simulated or written.
"""
from __future__ import annotations

import calendar
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.toolkit.configfile import ConfigError, Section, load_yaml, one_of, positive
from lockstep.simulator.noise import NONE, REALISTIC, Group, Noise

DEFAULT_START = calendar.timegm(time.strptime("2026-01-01T00:00:00Z", "%Y-%m-%dT%H:%M:%SZ"))
_JOB_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")  # Slurm: 123, 123_4 (arrays), 123+1 (het jobs)
# Kubernetes: <namespace>/<name>, a DNS-1123 label and a DNS-1123 subdomain (the simulator makes pods of it)
_KUBE_JOB_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?/[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?")
FAULT_KINDS = ("gpu_throttle", "slow_node", "slow_rank", "drift", "pause_storm", "link_flap", "storage_starvation",
               "hang", "xid", "ecc_error", "row_remap", "gpu_missing", "link_degraded", "member_lost", "gpu_defect",
               "fabric_congestion", "power_cap", "restart", "rank_stopped", "rank_died", "peer_dead", "rail_skew",
               "host_slow")
# A hang of one rank, as NCCL's RAS sees it: its process stops entering collectives (still answering RAS), dies
# (RAS gets no answer from it, then considers it dead), or is dead to RAS at once; the rest of the job waits.
RANK_HANG_KINDS = ("rank_stopped", "rank_died", "peer_dead")
# What slows a rank's host in a host_slow fault: no GPU counter sees any of them.
HOST_SOURCES = ("cpu", "data_loader", "nic")
# Faults that happen at one instant (``at_s``) rather than over a window.
INSTANT_KINDS = ("xid", "ecc_error", "row_remap")
REMAP_OUTCOMES = ("pending", "failed")
# A GPU broken before the job started (gpu_defect): heat (thermal slowdown at ~90 C), the power brake (a
# PSU or board asserting it), a PCIe link trained at fewer lanes (its host transfers take longer).
DEFECTS = ("thermal", "power_brake", "pcie")
# Faults of the whole cluster or job, with no node of their own.
WIDE_KINDS = ("hang", "storage_starvation", "fabric_congestion", "power_cap", "restart", "rail_skew")


@dataclass(frozen=True)
class Cluster:
    nodes: int
    gpus_per_node: int = 8
    nodes_per_rack: int = 4
    rack_budget_watts: float = 60000.0


@dataclass(frozen=True)
class Checkpoint:
    every_s: float
    blocking_s: float
    write_bytes: float


@dataclass(frozen=True)
class Job:
    job_id: str
    nodes: tuple[str, ...]
    step_time_s: float
    checkpoint: Checkpoint | None
    storage_read_bytes_per_step: float


@dataclass(frozen=True)
class Fault:
    """One fault; fields a kind does not use keep their defaults."""

    kind: str
    start_s: float
    end_s: float
    node: str | None = None
    gpu: int | None = None      # gpu_throttle, slow_rank, drift, xid, ecc_error, row_remap, gpu_missing, rank hangs
    nic: int | None = None      # pause_storm (rail index); link_flap uses ``hca``
    priority: int = 3
    clock_factor: float = 1.0
    reason: str = "thermal"
    slowdown: float = 1.0
    flaps: int = 1
    read_cap_bytes_per_s: float = 0.0
    code: int = 0
    count: int = 1              # ecc_error: uncorrectable errors counted
    outcome: str = "pending"    # row_remap: pending (until a GPU reset) or failed
    rate_factor: float = 1.0    # link_degraded: the link's data rate against its nominal (NDR trained as HDR: 0.5)
    defect: str = "thermal"     # gpu_defect: thermal, power_brake or pcie
    lanes: int = 16             # gpu_defect pcie: the lanes the link trained at (of 16)
    throughput: float = 1.0     # fabric_congestion: the all-reduce's throughput against its nominal
    pause_share: float = 0.0    # fabric_congestion: share of each job NIC's time paused by PFC
    share: float = 1.0          # rail_skew: rail ``nic`` carries this many times its usual bytes on every job node
    source: str = "cpu"         # host_slow: what holds the rank back (HOST_SOURCES)


@dataclass(frozen=True)
class Validation:
    """Validation runs the simulator stores for its nodes, as `lockstep validate` would (optional)."""

    every_s: float                  # a round of runs at t = 0, every_s, 2 every_s, ...
    history_runs: int = 3           # earlier daily runs at nominal figures, so baselines exist from the start


@dataclass(frozen=True)
class PrometheusOutage:
    """For the evaluation only (the simulator ignores it): from ``start_s`` to ``end_s`` the analytics
    service gets no answer from Prometheus, which was itself down (its samples lost) for the first
    ``lost_s`` of it; ``make eval`` replays the run through the service's refresh and its catch-up."""

    start_s: float
    end_s: float
    lost_s: float


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    duration_s: float
    sample_period_s: float
    cluster: Cluster
    job: Job
    faults: tuple[Fault, ...]
    start_timestamp: float = DEFAULT_START
    file: str = "<string>"
    validation: Validation | None = None
    noise: Noise = REALISTIC
    prometheus_outage: PrometheusOutage | None = None

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node_name(i) for i in range(self.cluster.nodes))

    @property
    def ticks(self) -> int:
        """Samples in the scenario, t = 0, P, 2P, ... duration."""
        return int(self.duration_s // self.sample_period_s) + 1


def node_name(index: int) -> str:
    return f"node{index:02d}"


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file; raises ``ConfigError`` naming file, line and field."""
    return parse_scenario(load_yaml(path), path)


def parse_scenario(data: object, file: str | Path) -> Scenario:
    top = Section(data, file)
    name = top.get("name", str)
    seed = top.get("seed", int, 0)
    duration = _num(top, "duration_s", check=positive)
    period = _num(top, "sample_period_s", 5.0, check=positive)
    start = _num(top, "start_timestamp", float(DEFAULT_START))
    cluster = _cluster(top.section("cluster"))
    names = tuple(node_name(i) for i in range(cluster.nodes))
    job = _job(top.section("job"), names)
    faults = tuple(_fault(s, names, cluster, duration) for s in top.sections("faults"))
    validation = _validation(top.section("validation", None))
    noise = _noise(top)
    outage = _outage(top.section("prometheus_outage", None), duration)
    top.finish()
    return Scenario(name, seed, duration, period, cluster, job, faults, start, str(file), validation, noise, outage)


def _outage(s: Section | None, duration: float) -> PrometheusOutage | None:
    if s is None:
        return None
    start, end = _num(s, "start_s", check=_in_run(duration)), _num(s, "end_s", check=_in_run(duration))
    if end <= start:
        raise s.error("end_s", f"must be after start_s ({start:g}), got {end:g}")
    lost = _num(s, "lost_s", (end - start) / 2, check=lambda v: None if 0 <= v <= end - start else
                f"must be 0..{end - start:g} (the outage's length)")
    s.finish()
    return PrometheusOutage(start, end, lost)


def _validation(s: Section | None) -> Validation | None:
    if s is None:
        return None
    v = Validation(_num(s, "every_s", check=positive),
                   s.get("history_runs", int, 3, check=lambda v: None if 0 <= v <= 100 else "must be 0..100"))
    s.finish()
    return v


def _noise(top: Section) -> Noise:
    """``noise: none``, ``noise: realistic`` (the default), or a mapping of ``Noise`` fields (the
    others realistic)."""
    if not isinstance(top.data.get("noise"), dict):
        word = top.get("noise", str, "realistic", check=one_of("none", "realistic"))
        return NONE if word == "none" else REALISTIC
    s = top.section("noise")
    def share(v):
        return None if 0 <= v <= 1 else "must be 0..1"
    fields = {k: _num(s, k, getattr(REALISTIC, k), check=lambda v: None if v >= 0 else "must be >= 0")
              for k in ("gpu_speed_spread", "node_speed_spread", "sensor", "rack_temperature_c", "power_cap_clock",
                        "transients_per_gpu_hour")}
    fields.update({k: _num(s, k, getattr(REALISTIC, k), check=share) for k in ("missed_scrapes", "power_cap_share")})
    cov = s.get("step_cov", (float, str), REALISTIC.step_cov)
    fields["step_cov"] = "pai" if cov == "pai" else _num(s, "step_cov", REALISTIC.step_cov,
                                                         check=lambda v: None if 0 <= v < 1 else "must be 0..1 or pai")
    fields["groups"] = tuple(_group(g) for g in s.sections("groups"))
    s.finish()
    return Noise(**fields)


def _group(s: Section) -> Group:
    g = Group(_num(s, "share", check=lambda v: None if 0 < v < 1 else "must be in (0, 1)"),
              _num(s, "speed", check=positive))
    s.finish()
    return g


def _cluster(s: Section) -> Cluster:
    c = Cluster(s.get("nodes", int, check=positive), s.get("gpus_per_node", int, 8, check=positive),
                s.get("nodes_per_rack", int, 4, check=positive),
                _num(s, "rack_budget_watts", 60000.0, check=positive))
    s.finish()
    return c


def _job(s: Section, names: tuple[str, ...]) -> Job:
    spec = s.get("nodes", (int, list))
    if isinstance(spec, int):
        if not 0 < spec <= len(names):
            raise s.error("nodes", f"must be 1..{len(names)} (the cluster's node count), got {spec}")
        nodes = names[:spec]
    else:
        for n in spec:
            if n not in names:
                raise s.error("nodes", f"node {n!r} does not exist (cluster has {names[0]}..{names[-1]})")
        nodes = tuple(dict.fromkeys(spec))
    ck = s.section("checkpoint", None)
    checkpoint = None
    if ck is not None:
        checkpoint = Checkpoint(_num(ck, "every_s", check=positive), _num(ck, "blocking_s", check=positive),
                                _num(ck, "write_bytes", 1.0e12, check=positive))
        ck.finish()
        if checkpoint.blocking_s >= checkpoint.every_s:
            raise ck.error("blocking_s", "must be shorter than every_s")
    job = Job(str(s.get("job_id", (str, int), check=_job_id)), nodes, _num(s, "step_time_s", check=positive), checkpoint,
              _num(s, "storage_read_bytes_per_step", 1.0e9, check=lambda v: None if v >= 0 else "must be >= 0"))
    s.finish()
    return job


def _job_id(value: str | int) -> str | None:
    # The job id names files under --root (gpu-jobs-users/<job_id>): "../../x" would write outside it.
    return None if _JOB_ID.fullmatch(str(value)) or _KUBE_JOB_ID.fullmatch(str(value)) else \
        "must be a Slurm job id (letters, digits, '_', '+', '-', '.'; not starting with '.'), e.g. 4242 or 4242_7, " \
        "or a Kubernetes <namespace>/<name> (lower-case DNS names), e.g. ml-team/llama-pretrain"


def _fault(s: Section, names: tuple[str, ...], cluster: Cluster, duration: float) -> Fault:
    kind = s.get("kind", str, check=one_of(*FAULT_KINDS))
    fields = {"kind": kind, **_window(s, kind, duration)}
    if kind not in WIDE_KINDS:
        fields["node"] = s.get("node", str, check=lambda n: None if n in names else
                               f"node {n!r} does not exist (cluster has {names[0]}..{names[-1]})")
    fields.update(_params(s, kind, cluster.gpus_per_node))
    s.finish()
    return Fault(**fields)


def _window(s: Section, kind: str, duration: float) -> dict:
    if kind in INSTANT_KINDS:
        at = _num(s, "at_s", check=_in_run(duration))
        return {"start_s": at, "end_s": at, **({"code": s.get("code", int, check=positive)} if kind == "xid" else {})}
    start, end = _num(s, "start_s", check=_in_run(duration)), _num(s, "end_s")
    if end <= start:
        raise s.error("end_s", f"must be after start_s ({start:g}), got {end:g}")
    return {"start_s": start, "end_s": end}


def _params(s: Section, kind: str, gpus: int) -> dict:
    """The kind's own fields (defaults in ``Fault``); ``hca`` of a link_flap or link_degraded is stored as ``nic``."""
    def rail(v):
        return None if 0 <= v < gpus else f"must be 0..{gpus - 1}"
    if kind in ("xid", "gpu_missing", *RANK_HANG_KINDS):
        return {"gpu": s.get("gpu", int, check=rail)}
    if kind == "ecc_error":
        return {"gpu": s.get("gpu", int, check=rail), "count": s.get("count", int, 1, check=positive)}
    if kind == "row_remap":
        return {"gpu": s.get("gpu", int, check=rail), "outcome": s.get("outcome", str, "pending",
                                                                      check=one_of(*REMAP_OUTCOMES))}
    if kind == "gpu_throttle":
        return {"gpu": s.get("gpu", int, check=rail),
                "clock_factor": _num(s, "clock_factor", 0.7, check=lambda v: None if 0 < v < 1 else "must be in (0, 1)"),
                "reason": s.get("reason", str, "thermal", check=one_of("thermal", "power"))}
    if kind == "slow_node":
        return {"slowdown": _num(s, "slowdown", 1.25, check=lambda v: None if v > 1 else "must be > 1")}
    if kind == "host_slow":
        return {"gpu": s.get("gpu", int, check=rail),
                "slowdown": _num(s, "slowdown", 1.5, check=lambda v: None if v > 1 else "must be > 1"),
                "source": s.get("source", str, "cpu", check=one_of(*HOST_SOURCES))}
    if kind in ("slow_rank", "drift"):
        return {"gpu": s.get("gpu", int, check=rail),
                "slowdown": _num(s, "slowdown", 1.5 if kind == "slow_rank" else 1.3,
                                 check=lambda v: None if v > 1 else "must be > 1")}
    if kind == "pause_storm":
        return {"nic": s.get("nic", int, check=rail),
                "priority": s.get("priority", int, 3, check=lambda v: None if 0 <= v <= 7 else "must be 0..7")}
    if kind == "link_flap":
        return {"nic": s.get("hca", int, check=rail), "flaps": s.get("flaps", int, 1, check=positive)}
    if kind == "link_degraded":
        return {"nic": s.get("hca", int, check=rail),
                "rate_factor": _num(s, "rate_factor", 0.5, check=lambda v: None if 0 < v < 1 else "must be in (0, 1)")}
    if kind == "rail_skew":
        return {"nic": s.get("rail", int, check=rail),
                "share": _num(s, "share", 2.0, check=lambda v: None if v > 1 else "must be > 1")}
    if kind == "storage_starvation":
        return {"read_cap_bytes_per_s": _num(s, "read_cap_bytes_per_s", check=positive)}
    if kind == "gpu_defect":
        defect = s.get("defect", str, "thermal", check=one_of(*DEFECTS))
        out = {"gpu": s.get("gpu", int, check=rail), "defect": defect}
        if defect == "pcie":
            out["lanes"] = s.get("lanes", int, 8, check=lambda v: None if v in (1, 2, 4, 8) else "must be 1, 2, 4 or 8")
            out["slowdown"] = _num(s, "slowdown", 1.15, check=lambda v: None if v > 1 else "must be > 1")
        else:
            out["clock_factor"] = _num(s, "clock_factor", 0.8, check=_share_open)
        return out
    if kind == "fabric_congestion":
        return {"throughput": _num(s, "throughput", 0.6, check=_share_open),
                "pause_share": _num(s, "pause_share", 0.1, check=lambda v: None if 0 <= v < 1 else "must be 0..1")}
    if kind == "power_cap":
        return {"clock_factor": _num(s, "clock_factor", 0.85, check=_share_open),
                "reason": s.get("reason", str, "power", check=one_of("thermal", "power"))}
    return {}


def _share_open(v: float) -> str | None:
    return None if 0 < v < 1 else "must be in (0, 1)"


def _num(s: Section, key: str, default: object = ..., check=None) -> float:
    """A number; PyYAML (YAML 1.1) reads ``2.0e12`` without an exponent sign as a string, so
    numeric strings are accepted as the scenario contract writes them."""
    value = s.get(key, (float, str)) if default is ... else s.get(key, (float, str), default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise s.error(key, f"must be a number, got {value!r}") from None
    if value is not None and not math.isfinite(value):   # YAML .inf/.nan: a run that never ends, NaN ticks
        raise s.error(key, f"must be a finite number, got {value!r}")
    if check is not None and value is not None and (problem := check(value)):
        raise s.error(key, problem)
    return value


def _in_run(duration: float):
    return lambda v: None if 0 <= v <= duration else f"must be within the run (0..{duration:g} s), got {v:g}"


__all__ = ["Checkpoint", "Cluster", "ConfigError", "Fault", "Job", "Scenario", "load_scenario", "parse_scenario"]
