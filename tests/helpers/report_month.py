"""A month of telemetry with known answers, as a simulator-shaped long frame (simulator/FORMATS.md)
for ``lockstep.localcluster.backfill`` (used by tests/analytics/report/test_monthly.py).

Every expected figure in EXPECTED is derived from the parameters below, not from the report code.
"""
from __future__ import annotations

from datetime import datetime, timezone

START = datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp()
DAYS = 31
PERIOD = 300                          # seconds between samples (coarse, to keep the backfill fast)
N = DAYS * 86400 // PERIOD            # samples per series
H, D = 3600, 86400
CKPT_EVERY, CKPT_OFFSET, CKPT_SAMPLES = 6 * H, 3 * H, 4   # job 100 blocks 4 samples = 1200 s per checkpoint
CKPT_BYTES_PER_NODE = 1.2e12
STRAGGLER_RATE = 0.1                  # lost GPU-seconds per second, job 100
IMBALANCE_RATE = 0.05                 # GPU-seconds per second job 100's ranks wait for node01 GPU 1 (1.12x)
JOB200_SAMPLES = 10 * D // PERIOD - 2  # job 200 ends 10 min before day 10 (outside the 5 min lookback)
# job 200's checkpoints as the analytics service measured them: counted at these samples, each this long and big
JOB200_CKPT_AT, JOB200_CKPT_S, JOB200_CKPT_BYTES = (100, 1000, 2000), 500.0, 2.0e12


def in_ckpt(k: int) -> bool:
    t = k * PERIOD
    return t >= CKPT_OFFSET and (t - CKPT_OFFSET) % CKPT_EVERY < CKPT_SAMPLES * PERIOD


CHECKPOINTS = sum(1 for k in range(N) if in_ckpt(k) and not in_ckpt(k - 1))
EXPECTED = {
    "allocated": {"100": 4 * DAYS * 24.0, "200": 2 * 240.0},
    "lost_checkpoint_h": {"100": CHECKPOINTS * 4 * CKPT_SAMPLES * PERIOD / H},
    "lost_straggler_h": {"100": STRAGGLER_RATE * (N - 1) * PERIOD / H},
    "imbalance_h": {"100": IMBALANCE_RATE * (N - 1) * PERIOD / H},
    "kwh": {"r1": 20e3 * (N - 1) * PERIOD / 3.6e6, "r2": 2 * 15e3 * (N - 1) * PERIOD / 3.6e6},
    "peak_w": {"r1": 25e3, "r2": 54e3},
    "budget_w": {"r1": 30e3, "r2": 60e3},
    "checkpoints": CHECKPOINTS,
    "blocked_s": CKPT_SAMPLES * PERIOD,
    "observed_gb_s": 2 * CKPT_BYTES_PER_NODE / (CKPT_SAMPLES * PERIOD) / 1e9,
    "measured": {"checkpoints": len(JOB200_CKPT_AT), "mean_s": JOB200_CKPT_S, "mean_gb": JOB200_CKPT_BYTES / 1e9,
                 "gb_s": JOB200_CKPT_BYTES / JOB200_CKPT_S / 1e9},
    # most recurring first: throttling on 5 days, XID 48 on 3, link flaps on 2, ECC burst on 1
    "fault_order": [("node00", "gpu 1", "throttling (h)"), ("node00", "gpu 0", "xid 48"),
                    ("node01", "mlx5_1 port 1", "link flap"), ("node02", "gpu 1", "ecc corrected")],
    "throttle_h": 10.0,
    "gpus": 6,
    # per UTC day: jobs 100 (4 GPUs) and 200 (2 GPUs, its last sample on day 9 at 23:50) at hourly points
    "demand_gpu_h_per_day": [6 * 24.0] * 10 + [4 * 24.0] * (DAYS - 10),
    # each rack's peak per day: r1's 25 kW sampled at day 5's 00:00, r2's two PDUs at 27 kW from day 20's
    # 00:00 for an hour. A peak window ends on its point, so a sample at 00:00 closes the day before (as an
    # event's (since, timestamp] does in the fault ranking).
    "peak_w_per_day": {"r1": [25e3 if d == 4 else 20e3 for d in range(DAYS)],
                       "r2": [54e3 if d in (19, 20) else 30e3 for d in range(DAYS)]},
    "failures": {"gpu": 0, "gpu memory": 3, "network": 3},   # XID 48 thrice; links down 2 + 1
}


def _series(name: str, labels: dict[str, str], values) -> list[dict]:
    return [{"metric": name, **labels, "timestamp": START + k * PERIOD, "value": float(v)} for k, v in values]


def _cumulative(step_value) -> list[tuple[int, float]]:
    total, out = 0.0, []
    for k in range(N):
        total += step_value(k)
        out.append((k, total))
    return out


def _events(days_counts: dict[int, float]) -> list[tuple[int, float]]:
    """A counter that jumps by ``count`` at noon of each listed day (0 = Oct 1)."""
    return _cumulative(lambda k: days_counts.get(k * PERIOD // D, 0.0) if k * PERIOD % D == 12 * H else 0.0)


def rows() -> list[dict]:
    """One dict per sample of every metric the report reads."""
    job_info = [sample for n, g in (("node00", 0), ("node00", 1), ("node01", 0), ("node01", 1))
                for sample in _series("lockstep_gpu_job_info", {"node": n, "gpu": str(g), "uuid": f"GPU-{n}-{g}",
                                                               "job_id": "100", "user": "alice"},
                                      ((k, 1) for k in range(N)))]
    job_info += [sample for g in (0, 1)
                 for sample in _series("lockstep_gpu_job_info", {"node": "node02", "gpu": str(g), "uuid": f"GPU-node02-{g}",
                                                                "job_id": "200", "user": "bob"},
                                       ((k, 1) for k in range(JOB200_SAMPLES)))]
    gpus = [sample for n in ("node00", "node01", "node02") for g in (0, 1)
            for sample in _series("lockstep_gpu_info", {"node": n, "gpu": str(g), "uuid": f"GPU-{n}-{g}", "model": "H100"},
                                  ((k, 1) for k in range(N)))]
    ckpt = _cumulative(lambda k: 4.0 * PERIOD if in_ckpt(k) else 0.0)
    half = N // 2  # analytics restarted mid-month: the straggler counter resets to zero
    strag = [(k, STRAGGLER_RATE * PERIOD * (k if k < half else k - half + 1)) for k in range(N)]
    lost = (_series("lockstep_job_lost_gpu_seconds_total", {"job_id": "100", "cause": "checkpoint"}, ckpt)
            + _series("lockstep_job_lost_gpu_seconds_total", {"job_id": "100", "cause": "straggler"}, strag))
    lost += _series("lockstep_job_imbalance_lost_gpu_seconds_total", {"job_id": "100"},
                    ((k, IMBALANCE_RATE * PERIOD * k) for k in range(N)))
    lost += _series("lockstep_job_imbalance_ratio", {"job_id": "100", "node": "node01", "gpu": "1"},
                    ((k, 1.12) for k in range(N)))
    energy, power = [], []
    for pdu, rack, watts, spike in (("r1-pdu", "r1", 20e3, {5 * D // PERIOD: 25e3}),
                                    ("r2-pdu-a", "r2", 15e3, {}), ("r2-pdu-b", "r2", 15e3, {})):
        energy += _series("lockstep_pdu_energy_joules_total", {"pdu": pdu, "rack": rack},
                          ((k, watts * PERIOD * k) for k in range(N)))
        peak = {k: 27e3 for k in range(20 * D // PERIOD, 20 * D // PERIOD + H // PERIOD)} if rack == "r2" else spike
        power += _series("lockstep_pdu_power_watts", {"pdu": pdu, "rack": rack},
                         ((k, peak.get(k, watts)) for k in range(N)))
    budget = [sample for rack, w in (("r1", 30e3), ("r2", 60e3))
              for sample in _series("lockstep_rack_power_budget_watts", {"rack": rack}, ((k, w) for k in range(N)))]
    xid = _series("lockstep_gpu_xid_errors_total", {"node": "node00", "gpu": "0", "xid": "48", "severity": "critical",
                                                     "category": "hardware", "action": "reset_gpu"},
                  _events({1: 1, 8: 1, 15: 1}))
    ecc = _series("lockstep_gpu_ecc_errors_total", {"node": "node02", "gpu": "1", "type": "corrected"},
                  _events({2: 500}))
    flaps = _series("lockstep_ib_port_link_downed_total", {"node": "node01", "device": "mlx5_1", "port": "1"},
                    _events({3: 2, 19: 1}))
    def hot(k: int) -> int:
        return 1 if (k * PERIOD // D) < 5 and 2 * H <= k * PERIOD % D < 4 * H else 0

    clock = (_series("lockstep_gpu_clock_event_active", {"node": "node00", "gpu": "1", "reason": "hw_thermal_slowdown"},
                     ((k, hot(k)) for k in range(N)))
             + _series("lockstep_gpu_clock_event_active", {"node": "node02", "gpu": "0", "reason": "gpu_idle"},
                       ((k, 1) for k in range(N))))
    stalled = _series("lockstep_job_stalled", {"job_id": "100", "cause": "checkpoint"},
                      ((k, int(in_ckpt(k))) for k in range(N)))
    burst = CKPT_BYTES_PER_NODE / CKPT_SAMPLES
    writes = [sample for n in ("node00", "node01") for sample in _series(
        "lockstep_storage_write_bytes_total", {"node": n, "mount": "/lustre", "fstype": "lustre", "fsname": "scratch"},
        _cumulative(lambda k: burst if in_ckpt(k) else 1e6 * PERIOD))]
    measured = [sample for name, each in (("lockstep_job_checkpoints_total", 1.0),
                                          ("lockstep_job_checkpoint_seconds_total", JOB200_CKPT_S),
                                          ("lockstep_job_checkpoint_written_bytes_total", JOB200_CKPT_BYTES))
                for sample in _series(name, {"job_id": "200"}, [(k, v) for k, v in _cumulative(
                    lambda k, each=each: each if k in JOB200_CKPT_AT else 0.0) if k < JOB200_SAMPLES])]
    return job_info + gpus + lost + energy + power + budget + xid + ecc + flaps + clock + stalled + writes + measured


def frame():
    import pandas as pd
    return pd.DataFrame(rows()).fillna({"node": ""}).fillna("")
