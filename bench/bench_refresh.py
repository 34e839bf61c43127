"""Analytics service at scale against a REAL Prometheus (the budget in docs/architecture.md: a steady
refresh of a 16,384-GPU job in under half the 30 s interval and under 3 GB, fetching only what changed).

Per size, one training job of N GPUs (N/8 nodes, one GPU throttled from minute 10) is written as
Prometheus TSDB blocks (20 minutes at 5 s, the scorers' inputs) and a real Prometheus serves them.
In a fresh child process (its memory is its own), the service's own refresh (``Refresher`` over
``PrometheusSource``, 15 min window, 30 s interval, the shipped 20 s request timeout) runs:
- first: the job's window fetched whole (in pieces, into preallocated matrices; as the service does,
  across as many refreshes at the same time as it takes, their times summed);
- steady: five refreshes 30 s apart, the held window moved on (its last step and the new rows);
- peer: two more refreshes with the held window dropped first, so the same window is fetched whole.
Per phase: wall time (fetch and decode / scoring), Prometheus' CPU (from its /proc stat), samples
returned, and the service's peak RSS (VmHWM, reset between phases); over all phases, the largest
answer read, against the service's --prometheus-max-answer-size. The figures are the ratios of
the peer over the steady refresh, measured in one run. Then the post-mortem of a 4,096-GPU hour
(``lockstep analytics evaluate --prometheus-url``): wall time and peak RSS.

TSDB blocks are kept under $LOCKSTEP_BENCH_CACHE (default: the temp dir) between runs.
Usage: bench/bench_refresh.py [GPUS ...] [--postmortem GPUS|0]   (default 1024 4096 16384 --postmortem 4096)
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CACHE = Path(os.environ.get("LOCKSTEP_BENCH_CACHE", tempfile.gettempdir())) / "lockstep-bench-refresh"
WINDOW_S, INTERVAL_S, STEP_S = 900.0, 30.0, 5.0
JOB = "9000"


def scenario(gpus: int, minutes: int) -> dict:
    nodes = gpus // 8
    return {"name": f"bench-refresh-{gpus}", "seed": 17, "duration_s": minutes * 60, "sample_period_s": STEP_S,
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "nodes_per_rack": 16, "rack_budget_watts": 600000},
            "job": {"job_id": JOB, "nodes": nodes, "step_time_s": 1.5},
            "faults": [{"kind": "gpu_throttle", "node": "node05", "gpu": 3, "start_s": 600, "end_s": minutes * 60,
                        "clock_factor": 0.7, "reason": "thermal"}]}


def tsdb(gpus: int, minutes: int) -> tuple[Path, float]:
    """The Prometheus working dir holding the scenario's blocks (built once), and the run's start time."""
    from refresh_data import backfill

    return backfill(scenario(gpus, minutes), CACHE / f"{gpus}x{minutes}m")


def prometheus_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(reset: bool = False) -> float:
    """This process' peak RSS since the last reset (VmHWM); ``reset`` starts a new peak from here."""
    peak = int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    return peak


async def _phases(url: str, prom_pid: int, start: float) -> dict:
    import aiohttp

    from lockstep.analytics.prom import api as source_prom
    from lockstep.analytics.service import refresh
    from lockstep.analytics.service.config import ServiceConfig
    from lockstep.analytics.service.source import PrometheusSource

    scoring: list[float] = []
    score_window = refresh.score_window
    answers: list[int] = []
    read_answer = source_prom.read_answer

    async def measured(resp, max_bytes):
        body = await read_answer(resp, max_bytes)
        answers.append(len(body))
        return body

    source_prom.read_answer = measured

    def timed(*args):
        t0 = time.perf_counter()
        try:
            return score_window(*args)
        finally:
            scoring.append(time.perf_counter() - t0)

    refresh.score_window = timed
    config = ServiceConfig(prometheus_url=url, window_s=WINDOW_S, interval_s=INTERVAL_S, step_s=STEP_S,
                           resume_lookback_s=0.0)
    out: dict[str, list] = {"first": [], "steady": [], "full": []}
    peak_rss_mb(reset=True)
    async with aiohttp.ClientSession() as session:
        refresher = refresh.Refresher(PrometheusSource(session, url, config.timeout_s), config)
        plan = [("first", 0)] + [("steady", k) for k in range(1, 6)] + [("full", k) for k in range(6, 8)]
        for phase, k in plan:
            if phase == "full":
                refresher.state.windows.clear()
            cpu, t0 = prometheus_cpu(prom_pid), time.perf_counter()
            samples = full = refreshes = 0
            while refreshes == 0 or refresher.state.fills.held:    # a new window: until it is whole
                assert refreshes < 100, "the window was never fetched whole"
                await refresher.refresh(start + WINDOW_S + k * INTERVAL_S)
                health, refreshes = refresher.state.health, refreshes + 1
                assert health.up, health.last_error
                samples, full = samples + health.fetched_samples, full + health.full_fetches
            wall = time.perf_counter() - t0
            assert JOB in refresher.state.results.jobs, health.last_error
            out[phase].append({"wall_s": wall, "score_s": scoring[-1], "prom_cpu_s": prometheus_cpu(prom_pid) - cpu,
                               "samples": samples, "full_fetches": full, "refreshes": refreshes,
                               "flagged": [[s.node, s.gpu] for s in refresher.state.results.jobs[JOB].stragglers]})
            if k in (0, 5):                 # the first fetch's peak, then the steady refreshes' own
                out[f"{phase}_peak_rss_mb"] = peak_rss_mb(reset=True)
    out["full_peak_rss_mb"] = peak_rss_mb()
    out["largest_answer_bytes"] = max(answers)
    return out


def child_refresh(url: str, prom_pid: int, start: float) -> dict:
    return asyncio.run(_phases(url, prom_pid, start))


def child_post_mortem(url: str, prom_pid: int, start: float) -> dict:
    """The post-mortem command over the hour, in this process (its peak RSS is the command's)."""
    import contextlib
    import io

    from lockstep.cli import main as lockstep

    out, cpu, t0 = io.StringIO(), prometheus_cpu(prom_pid), time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = lockstep(["analytics", "evaluate", "--prometheus-url", url, "--from", str(start),
                         "--to", str(start + 3600), "--json"])
    wall = time.perf_counter() - t0
    assert code == 0, f"evaluate exited {code}"
    rep = json.loads(out.getvalue())
    return {"wall_s": wall, "prom_cpu_s": prometheus_cpu(prom_pid) - cpu, "peak_rss_mb": peak_rss_mb(),
            "stragglers": [[d["node"], d["gpu"]] for d in rep["stragglers"]]}


def _in_child(kind: str, gpus: int, minutes: int) -> dict:
    """Start Prometheus on the blocks, run ``--child-<kind>`` against it in a fresh process."""
    from lockstep.stack import Stack, start_prometheus

    workdir, start = tsdb(gpus, minutes)
    with Stack() as stack:
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, workdir))
        out = subprocess.run([sys.executable, __file__, f"--child-{kind}", prom.url, str(prom.proc.pid), str(start)],
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} at {gpus} GPUs: {out.stderr[-3000:]}")
    backfilled = json.loads((workdir / "done.json").read_text())["backfill"]
    return {"gpus": gpus, "minutes": minutes, "backfill": backfilled, **json.loads(out.stdout.splitlines()[-1])}


def main(argv: list[str]) -> int:
    from refresh_report import report, summarize

    postmortem_gpus = 4096
    if "--postmortem" in argv:
        at = argv.index("--postmortem")
        postmortem_gpus = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    sizes = [int(a) for a in argv] or [1024, 4096, 16384]
    load = [os.getloadavg()]
    rows = [summarize(_in_child("refresh", gpus, 20)) for gpus in sizes]
    pm = _in_child("post-mortem", postmortem_gpus, 60) if postmortem_gpus else None
    load.append(os.getloadavg())
    setup = f"{WINDOW_S / 60:g} min window at {STEP_S:g} s, every {INTERVAL_S:g} s"
    return 0 if report(rows, pm, tuple(load), setup) else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1].startswith("--child-"):
        kind, url, pid, start = sys.argv[1][len("--child-"):], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
        result = {"refresh": child_refresh, "post-mortem": child_post_mortem}[kind](url, pid, start)
        print(json.dumps(result))
    else:
        raise SystemExit(main(sys.argv[1:]))
