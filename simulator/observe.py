"""What the hardware shows for one interval: GPU gauges (NVML units), per-rail port and PFC counter
increments, storage counter increments. Vectorised over GPUs / rails / nodes; noise is seeded."""
from __future__ import annotations

import numpy as np

from lockstep.exporters.catalog.enums import CLOCK_EVENT_BITS, IDLE_REASON
from lockstep.simulator import hardware as hw
from lockstep.simulator.faults import POWER_BITS, THERMAL_BITS, Conditions
from lockstep.simulator.job import JobTick
from lockstep.simulator.topology import BASE_PRIORITY, Topology


def _per_gpu(topo: Topology, job_values: np.ndarray | float, other: float) -> np.ndarray:
    out = np.full(topo.n_gpus, other, dtype=float)
    out[topo.job_gpus] = job_values
    return out


def gpu_gauges(topo: Topology, c: Conditions, j: JobTick, rng: np.random.Generator,
               noisy: np.random.Generator) -> dict[str, np.ndarray]:
    """``noisy``: the tick's own stream for the scenario's noise (``noise: none`` draws nothing from it)."""
    n, nz = topo.n_gpus, topo.draws
    compute, comm = _per_gpu(topo, j.compute, 0.0), _per_gpu(topo, j.comm, 0.0)
    spin, ckpt = _per_gpu(topo, j.spin, 0.0), _per_gpu(topo, j.ckpt, 0.0)
    idle = 1.0 - compute - comm - spin - ckpt
    running = topo.job_gpus & (compute + comm + spin > 0.05)
    capped = nz.power_capped(running & (compute > 0.3), noisy)
    # a cluster-wide power cap lowers every GPU's limit and holds them all at it
    limit = hw.POWER_LIMIT_W * ((0.35 + 0.65 * c.clock_factor) if c.cap == "power" and c.cap_share >= 0.5 else 1.0)
    capped |= running & (compute > 0.3) & (c.cap == "power")
    # a throttled GPU draws less while computing; a power-capped one sits at its limit
    compute_w = hw.POWER_COMPUTE_W * (0.35 + 0.65 * c.clock_factor)
    power = (hw.POWER_IDLE_W * np.clip(idle, 0, 1) + compute_w * compute + hw.POWER_COMM_W * comm
             + hw.POWER_SPIN_W * spin + hw.POWER_CKPT_W * ckpt + rng.normal(0, 6, n))
    power = np.where(c.power_capped & (compute > 0.3), limit - np.abs(rng.normal(0, 3, n)), power)
    if capped.any():
        power = np.where(capped, limit - np.abs(noisy.normal(0, 3, n)), power)
    power = np.clip(power, 60, limit)
    temp = 32.0 + 0.055 * power + rng.normal(0, 0.4, n) + nz.inlet_rise(topo.rack_slot[topo.gpu_node])
    hot = c.thermal | (running & (c.cap == "thermal"))
    temp = np.where(hot, hw.THERMAL_THROTTLE_C + np.abs(rng.normal(0, 0.8, n)), temp)
    if c.hot.any():      # drawn only then: the other scenarios' numbers stay as they were
        temp = np.where(c.hot, hw.DEFECT_C + np.abs(rng.normal(0, 0.8, n)), temp)
    clock_factor = c.clock_factor * nz.capped_clock(capped, noisy)
    clock = np.where(running, np.round(hw.MAX_SM_MHZ * clock_factor / 15) * 15, hw.IDLE_SM_MHZ)
    clock = clock - 15 * rng.integers(0, 2, n) * (c.clock_factor >= 1) * running
    reasons = c.reasons | np.where(running, 0, CLOCK_EVENT_BITS[IDLE_REASON])  # while nothing runs
    reasons = reasons | np.where(capped, POWER_BITS, 0)
    reasons = reasons | np.where(running & (c.cap == "thermal"), THERMAL_BITS, 0)
    util = np.clip(compute + comm + spin + 0.05 * ckpt, 0, 1)
    mem_used = np.where(topo.job_gpus, hw.MEMORY_JOB, hw.MEMORY_IDLE) + rng.integers(0, 2**24, n)
    sm = nz.sensor(np.clip(compute * hw.SM_COMPUTE + comm * hw.SM_COMM + spin * hw.SM_SPIN, 0, 1), running, noisy)
    return {
        "util": np.round(util * 100).astype(np.int64),
        "mem_util": np.round(np.clip(compute * 0.45 + comm * 0.2, 0, 1) * 100).astype(np.int64),
        "sm_active": np.round(sm, 4),
        "tensor_active": np.round(nz.sensor(compute * hw.TENSOR_COMPUTE, running, noisy), 4),
        "dram_active": np.round(compute * 0.32 + comm * 0.05, 4),
        "clock_sm": clock.astype(np.int64),
        "clock_sm_max": np.full(n, hw.MAX_SM_MHZ, np.int64),
        "power_mw": np.round(power * 1000).astype(np.int64),
        "power_limit_mw": np.round(np.full(n, limit) * 1000).astype(np.int64),
        "temp": np.round(temp).astype(np.int64),
        "mem_temp": np.round(temp - 5 + rng.normal(0, 0.3, n)).astype(np.int64),
        "mem_used": mem_used.astype(np.int64),
        "reasons": reasons.astype(np.int64),
        "pcie_width": c.lanes.astype(np.int64),
        "pcie_width_max": np.full(n, 16, np.int64),
    }


def port_increments(topo: Topology, c: Conditions, j: JobTick, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Increments of the rail ports' sysfs counters and the NICs' PFC counters for the interval."""
    n, period = topo.n_gpus, topo.scenario.sample_period_s
    per_step = topo.scenario.job.step_time_s * (1 - hw.COMPUTE_SHARE) * hw.LINK_RATE_BPS * hw.ALLREDUCE_LINK_EFFICIENCY
    up = 1.0 - c.flap_s / period
    data = _per_gpu(topo, j.steps * per_step, 0.0) * up
    if c.rail_bytes is not None:  # NCCL's channels unevenly spread: one rail carries more than its share
        data = data * c.rail_bytes
    tx = np.floor(data * rng.normal(1, 0.01, n) / 4).astype(np.int64)  # IB data counters: 4-octet words
    rx = np.floor(data * rng.normal(1, 0.01, n) / 4).astype(np.int64)
    tx_pk, rx_pk = tx * 4 // hw.MTU, rx * 4 // hw.MTU
    storm = c.storm_s
    paused = c.pause_share * period            # congestion: the switch pauses the NIC part of the time
    ecn = rng.poisson(tx_pk * 2e-6 + storm * 4e4 + paused * 4e3)
    flaps = c.flap_events
    inc = {
        "port_xmit_data": tx, "port_rcv_data": rx, "port_xmit_packets": tx_pk, "port_rcv_packets": rx_pk,
        "unicast_xmit_packets": tx_pk, "unicast_rcv_packets": rx_pk,
        "port_xmit_wait": rng.poisson(tx_pk * 0.05) + np.floor((storm + paused) * hw.XMIT_WAIT_TICKS_PER_S).astype(np.int64),
        "symbol_error": rng.poisson(c.flap_s * 40) + 150 * flaps, "link_downed": flaps,
        "link_error_recovery": 2 * flaps, "port_rcv_errors": rng.poisson(c.flap_s * 3),
        "port_xmit_discards": rng.poisson(c.flap_s * 50 + storm * 20),
        "np_ecn_marked_roce_packets": ecn, "np_cnp_sent": ecn, "rp_cnp_handled": rng.poisson(ecn * 0.97 + 0.0),
        "out_of_sequence": rng.poisson(c.flap_s * 30 + storm * 2),
        "local_ack_timeout_err": 3 * flaps + rng.poisson(storm * 0.5),
        "roce_adp_retrans": rng.poisson(c.flap_s * 10 + storm * 1),
    }
    inc.update(_pfc(topo, c))
    return inc


def _pfc(topo: Topology, c: Conditions) -> dict[str, np.ndarray]:
    """A storming NIC keeps sending pauses (tx) on its priority; the switch pauses it back (rx)."""
    shape = (topo.n_gpus, len(topo.pfc_priorities))
    col = np.array([topo.pfc_priorities.index(p) if p >= 0 else 0 for p in c.storm_priority])
    mask = np.zeros(shape)
    mask[np.arange(topo.n_gpus), col] = c.storm_s
    # congestion (fabric_congestion): the switches pause the job's NICs on the lossless class
    paused = np.zeros(shape)
    paused[:, topo.pfc_priorities.index(BASE_PRIORITY)] = c.pause_share * topo.scenario.sample_period_s
    return {
        "tx_pause": np.floor(mask * hw.STORM_PAUSES_PER_S).astype(np.int64),
        "tx_pause_duration": np.floor(mask * 0.97e6).astype(np.int64),  # mlx5 reports microseconds
        "rx_pause": np.floor((mask * 0.3 + paused) * hw.STORM_PAUSES_PER_S).astype(np.int64),
        "rx_pause_duration": np.floor((mask * 0.3 + paused) * 1e6).astype(np.int64),
    }


def storage_increments(topo: Topology, c: Conditions, j: JobTick, rng: np.random.Generator) -> dict[str, np.ndarray]:
    nodes = topo.job_nodes.astype(float)
    n_job = nodes.sum()
    job, period = topo.scenario.job, topo.scenario.sample_period_s
    read = np.floor(nodes * j.read_bytes / n_job * rng.normal(1, 0.01, len(nodes)))
    if c.read_cap is not None and c.read_cap_share >= 1:  # noise never beats a throughput cap
        read = np.minimum(read, np.floor(c.read_cap * period / n_job))
    ck = job.checkpoint
    checkpoint = nodes * ((ck.write_bytes / n_job / ck.blocking_s * j.ckpt * period) if ck else 0.0)
    write = np.floor(checkpoint + nodes * j.steps * 256 * 1024)  # plus logs and metrics per step
    steps = nodes * j.steps
    ckpt_files = nodes * (8 * j.ckpt * period / ck.blocking_s if ck else 0.0)
    opens = rng.poisson(steps * 8 + ckpt_files)
    cached = np.floor(steps * 64 * 2**20 / hw.SECTOR)  # dataloader's local NVMe cache
    out = {
        "lustre_read_bytes": read.astype(np.int64), "lustre_read_samples": np.ceil(read / hw.RPC_BYTES).astype(np.int64),
        "lustre_write_bytes": write.astype(np.int64),
        "lustre_write_samples": np.ceil(write / hw.RPC_BYTES).astype(np.int64),
        # the checkpoints' part of lustre_write_bytes (floored alone: never more than the whole), which the
        # cluster's storage systems take (simulator/storagesys.py)
        "lustre_ckpt_bytes": np.floor(checkpoint).astype(np.int64),
        "lustre_open": opens, "lustre_close": opens, "lustre_getattr": rng.poisson(steps * 24 + ckpt_files * 2),
        "lustre_statfs": rng.poisson(steps * 0.1),
        "nfs_read_bytes": rng.poisson(steps * 4) * 4096, "nfs_write_bytes": rng.poisson(steps * 4) * 4096,
        "nfs_READ": rng.poisson(steps * 1), "nfs_WRITE": rng.poisson(steps * 1),
        "nfs_GETATTR": rng.poisson(steps * 3), "nfs_ACCESS": rng.poisson(steps * 2),
        "nfs_OPEN": rng.poisson(steps * 0.2), "nfs_CLOSE": rng.poisson(steps * 0.2),
        "nvme_reads": np.floor(cached / 256).astype(np.int64), "nvme_read_sectors": cached.astype(np.int64),
        "nvme_read_ms": np.floor(cached / 256 * 0.08).astype(np.int64),
        "nvme_writes": rng.poisson(steps * 2), "nvme_write_sectors": rng.poisson(steps * 2) * 8,
        "nvme_write_ms": rng.poisson(steps * 0.1), "nvme_io_ms": np.floor(steps * 30).astype(np.int64),
    }
    return {**out, **job_io(out, j, nodes, period)}


def job_io(node: dict[str, np.ndarray], j: JobTick, nodes: np.ndarray, period: float) -> dict[str, np.ndarray]:
    """The job's cgroup on each of its nodes: the cache device's I/O is all its data loaders' (``node``: the
    node's increments), and its I/O pressure the share of the interval its ranks waited for input, plus the
    loaders' own waits on reads while the job runs (hardware.LOADER_IO_SHARE)."""
    # a step's input wait is its time less compute and collective, which rounding can leave a hair below zero:
    # a pressure counter never moves back
    waiting = max(float(np.nan_to_num(np.mean(j.io_wait))), 0.0) if len(j.io_wait) else 0.0
    running = min(max(j.steps * j.step_s / period, 0.0), 1.0) if np.isfinite(j.step_s) else 0.0
    return {"job_io_rbytes": node["nvme_read_sectors"] * hw.SECTOR * nodes.astype(np.int64),
            "job_io_wbytes": node["nvme_write_sectors"] * hw.SECTOR * nodes.astype(np.int64),
            "job_io_rios": node["nvme_reads"] * nodes.astype(np.int64),
            "job_io_wios": node["nvme_writes"] * nodes.astype(np.int64),
            "job_io_some_us": np.floor(nodes * (waiting + hw.LOADER_IO_SHARE * running) * period * 1e6).astype(np.int64),
            "job_io_full_us": np.floor(nodes * waiting * period * 1e6).astype(np.int64)}
