"""Analytics budget (docs/architecture.md): one scoring pass over 1,024 GPUs × 15 min at 5 s (six
signals) under 2 s and 1.5 GB on 2 cores; cost should grow linearly with GPUs (4,096 shown).

Each size runs in a fresh child process so its peak RSS is its own. The frame is the FORMATS.md long
frame of the six per-GPU signals the straggler scorer reads (SM and tensor activity, SM clock,
clock-event reason, rail transmit bytes and transmit wait) plus job info and per-node storage, with
one throttled GPU. Peer, measured in the same child on the same frame: a plain pandas
``groupby([metric, timestamp]).median()`` (the per-step peer median every scorer needs at least).

Usage: bench/bench_analytics.py [GPUS ...]   (default 1024 4096)
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S, BUDGET_MB = 2.0, 1536.0


def make_frame(gpus: int, duration_s: float = 900.0, period: float = 5.0, per_node: int = 8):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    times = 1767225600.0 + np.arange(0, duration_s + period, period)
    n, t = gpus, len(times)
    nodes = np.repeat([f"node{i:03d}" for i in range(n // per_node)], per_node)
    gpu = np.tile([str(g) for g in range(per_node)], n // per_node)
    factor = np.ones((t, n))
    factor[t // 3:, 5 * per_node + 3] = 0.7                    # node005 gpu 3 throttles a third in
    compute = 1.125 / factor
    step = compute.max(axis=1, keepdims=True) + 0.375
    tensor = 0.58 * compute / step
    sm = 0.86 * compute / step + 0.12 * 0.375 / step + rng.normal(0, 0.005, (t, n))
    tx = np.cumsum(np.broadcast_to(4.5e10 * period / step, (t, n)), axis=0)

    def long(metric, values, **labels):
        data = {"timestamp": np.repeat(times, values.shape[1]), "metric": metric,
                "node": np.tile(labels.pop("node", nodes), t), "value": values.reshape(-1)}
        data.update({k: np.tile(v, t) if not isinstance(v, str) else v for k, v in labels.items()})
        return pd.DataFrame(data)

    dev = np.array([f"mlx5_{g}" for g in gpu])
    node_names = nodes[::per_node]
    io = np.cumsum(np.broadcast_to(2.6e9 * period, (t, len(node_names))), axis=0)
    parts = [long("lockstep_gpu_job_info", np.ones((t, n)), gpu=gpu, job_id="9000"),
             long("lockstep_gpu_sm_active_ratio", sm, gpu=gpu),
             long("lockstep_gpu_tensor_active_ratio", tensor, gpu=gpu),
             long("lockstep_gpu_sm_clock_hertz", 1.98e9 * factor, gpu=gpu),
             long("lockstep_gpu_sm_clock_max_hertz", np.full((t, n), 1.98e9), gpu=gpu),
             long("lockstep_gpu_clock_event_active", (factor < 1).astype(float), gpu=gpu, reason="sw_thermal_slowdown"),
             long("lockstep_ib_port_transmit_bytes_total", tx, device=dev, port="1"),
             long("lockstep_ib_port_transmit_wait_total", np.cumsum(rng.poisson(50, (t, n)), axis=0).astype(float),
                  device=dev, port="1"),
             long("lockstep_storage_read_bytes_total", io, node=node_names, mount="/lustre"),
             long("lockstep_storage_write_bytes_total", io * 0.01, node=node_names, mount="/lustre")]
    frame = pd.concat(parts, ignore_index=True)
    labels = [c for c in frame.columns if c not in ("timestamp", "value")]
    frame[labels] = frame[labels].fillna("")
    return frame.astype({c: "category" for c in labels})


def child(gpus: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from lockstep.analytics.evaluation.simframe import build_features
    from lockstep.analytics.scoring.score import score_features

    frame = make_frame(gpus)
    rss_frame = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    score_features(build_features(make_frame(64)))           # imports and first-call costs
    times, peers = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        results = score_features(build_features(frame))
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        frame.groupby(["metric", "timestamp"], observed=True)["value"].median()
        peers.append(time.perf_counter() - t0)
    flagged = [[d["node"], d["gpu"]] for r in results.values() for d in r.detections]
    tracemalloc.start()                     # numpy and pandas buffers are traced; timing runs are not
    score_features(build_features(frame))
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"gpus": gpus, "rows": len(frame), "score_s": min(times), "peer_s": min(peers), "pass_peak_mb": traced,
            "rss_frame_mb": rss_frame, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "flagged": flagged}


def main(sizes: list[int]) -> int:
    rows = []
    for gpus in sizes:
        out = subprocess.run([sys.executable, __file__, "--child", str(gpus)], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        rows.append(json.loads(out.stdout))
    print(f"{'GPUs':>6} {'rows':>10} {'score s':>8} {'peer s':>7} {'ratio':>6} {'pass peak MB':>13} "
          f"{'RSS frame MB':>13} {'RSS peak MB':>12}")
    for r in rows:
        print(f"{r['gpus']:>6} {r['rows']:>10} {r['score_s']:>8.3f} {r['peer_s']:>7.3f} {r['score_s'] / r['peer_s']:>6.2f} "
              f"{r['pass_peak_mb']:>13.0f} {r['rss_frame_mb']:>13.0f} {r['rss_peak_mb']:>12.0f}")
    print("ratio = scoring pass / peer (pandas groupby-median over the same frame); pass peak = memory the "
          "scoring pass allocates (tracemalloc); RSS = whole child process, frame included")
    for a, b in zip(rows, rows[1:]):
        print(f"growth {a['gpus']} → {b['gpus']} GPUs (×{b['gpus'] / a['gpus']:.0f}): "
              f"scoring ×{b['score_s'] / a['score_s']:.2f}, "
              f"peer ×{b['peer_s'] / a['peer_s']:.2f}")
    ok = True
    for r in rows:
        if r["gpus"] == 1024:
            ok = r["score_s"] < BUDGET_S and r["rss_peak_mb"] < BUDGET_MB
            print(f"budget 1,024 GPUs: {r['score_s']:.2f} s (< {BUDGET_S} s), peak RSS {r['rss_peak_mb']:.0f} MB "
                  f"(< {BUDGET_MB:.0f} MB): {'ok' if ok else 'OVER'}")
        if r["flagged"] != [["node005", "3"]]:
            print(f"unexpected detections at {r['gpus']} GPUs: {r['flagged']}")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]))))
    else:
        raise SystemExit(main([int(a) for a in sys.argv[1:]] or [1024, 4096]))
