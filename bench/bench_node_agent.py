"""The whole node agent (default collectors) vs node_exporter's infiniband collector on one simulated H100 node.

The middle node of a three-node job written by a live ``lockstep sim run`` (8 GPUs in gpus.json, 8 mlx5 HCAs, 8
NICs, Lustre + NFS mounts and NVMe disks under proc/, NCCL Inspector files of 4 communicators per GPU, a simulated
NCCL RAS service for the job's 24 ranks) at 60x: a new tree every 83 ms. Debian's node_exporter runs
``--collector.disable-defaults --collector.infiniband`` on the node's sysfs; ``lockstep exporter --sim.node-root``
runs every default collector. Both are scraped once per simulator tick (so every scrape sees new counters and a
new gpus.json, as at Prometheus' pace; ``--back-to-back`` scrapes as fast as possible instead), interleaved,
with ``Accept-Encoding: gzip`` like Prometheus. Printed for each: process CPU per scrape (utime+stime deltas
from /proc/<pid>/stat, everything the process did in the window), p50/p99 client latency, RSS (VmRSS of
/proc/<pid>/status), series per scrape, idle CPU; then the ratios and the budget of docs/architecture.md: CPU per
scrape <= node_exporter's, p99 < 25 ms, RSS < 80 MB, <= 1,500 series. Two more processes run the defaults plus
one off-by-default collector each, judged against the same budget (the series budget counts default collectors
only, so it is reported, not judged): ``nccl-ras`` against the node's simulated RAS service, polling it once per
scrape interval as a site scraping every 15 s with the collector's default would; ``nccl-inspector`` on the files
the simulator rewrites every 30 simulated seconds (NCCL's shortest dump interval), with its settle time and
maximum age scaled to the simulator's pace. Exit status 1 when a budget is missed.
``--compare-fast-path`` adds the defaults with every scrape through aiohttp (``exporters/toolkit/fastpath.py``
off) and prints the ratio. ``--exporter-only`` loads only the exporter subcommand of ``lockstep`` (shows what
other subcommands' imports add to RSS).

Helpers (HTTP scraper, CPU accounting) are bench_exporter's.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_exporter import cpu_seconds, measure

from lockstep import stack

BUDGET = {"cpu_ratio": 1.0, "p99_s": 0.025, "rss_bytes": 80e6, "series": 1500}
SPEED = 60
RAS = "lockstep+nccl-ras"
TICK_S = 5 / SPEED  # sample_period_s of SCENARIO at SPEED: one tree update every 83 ms
SCENARIO = ("name: bench-node\nseed: 1\nduration_s: 86400\nsample_period_s: 5\n"
            "cluster: {nodes: 1, gpus_per_node: 8, nodes_per_rack: 1, rack_budget_watts: 60000}\n"
            "job: {job_id: '1', nodes: 1, step_time_s: 1.5, storage_read_bytes_per_step: 1.0e9}\n")


def live_node(st: stack.Stack, work: Path, timeout: float = 60.0, days: int = 1, nodes: int = 1) -> Path:
    """Start ``lockstep sim run`` on a scenario of ``days`` simulated days (stopped with the stack), its job on
    ``nodes`` nodes; the job's middle node (node00 of one) once complete."""
    scenario = work / "bench-node.yaml"
    scenario.write_text(SCENARIO.replace("duration_s: 86400", f"duration_s: {86400 * days}")
                        .replace("nodes: 1", f"nodes: {nodes}"))
    argv = [sys.executable, "-m", "lockstep", "sim", "run", str(scenario), "--root", str(work / "sim"),
            "--speed", str(SPEED)]
    sim = st.add(stack.start_process("sim", argv, work / "simlog", "", ready_path=None))
    node, deadline = work / "sim" / f"node{nodes // 2:02d}", time.monotonic() + timeout
    while full_node(node):
        if not sim.alive() or time.monotonic() > deadline:
            raise SystemExit(f"simulator did not write a full node (missing: {', '.join(full_node(node))}):\n"
                             f"{sim.log_tail()}")
        time.sleep(0.2)
    return node


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid``: ``VmRSS`` (kB) in /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def heavy_libraries(pid: int) -> list[str]:
    """Analysis libraries mapped into ``pid`` (the node agent needs none; each costs tens of MB of RSS)."""
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return [name for name in ("pandas", "numpy", "matplotlib", "scipy") if f"site-packages/{name}/" in maps]


def idle_cpu(services: dict, seconds: float = 5.0) -> dict:
    """CPU seconds per wall second of each process with no scrapes (background threads)."""
    before = {name: cpu_seconds(s.proc.pid) for name, s in services.items()}
    time.sleep(seconds)
    return {name: (cpu_seconds(s.proc.pid) - before[name]) / seconds for name, s in services.items()}


def full_node(node: Path) -> list[str]:
    """What the simulated node lacks of a full H100 node (empty when complete)."""
    checks = {"8 HCAs": len(list((node / "sys/class/infiniband").glob("*"))) >= 8,
              "8 NICs": len(list((node / "ethtool").glob("*/statistics"))) >= 8,
              "gpus.json": (node / "gpus.json").is_file(),
              "Lustre llite stats": any((node / "proc/fs/lustre/llite").glob("*/stats")),
              "NFS mountstats": "fstype nfs" in _text(node / "proc/self/mountstats"),
              "NVMe diskstats": " nvme" in _text(node / "proc/diskstats")}
    return [name for name, ok in checks.items() if not ok]


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


# `lockstep` with only the exporter subcommand loaded: what the agent costs without the other subcommands'
# imports (diagnosis for the RSS budget; the budget is judged on the real `lockstep exporter`).
_EXPORTER_ONLY = ("import sys, lockstep.cli as c; c.SUBCOMMANDS = ('lockstep.exporters.cli',); sys.exit(c.main())",)


# The agent without its fast path for plain scrapes (exporters/toolkit/fastpath.py): every scrape through aiohttp.
_WITHOUT_FAST_PATH = """
import sys, lockstep.cli as c, lockstep.exporters.server as s
from lockstep.exporters.toolkit.fastpath import FAST_ROUTE
make = s.create_app
def create_app(config, scraper):
    app = make(config, scraper)
    del app[FAST_ROUTE]
    return app
s.create_app = create_app
sys.exit(c.main())
"""
DEFAULTS, INSPECTOR, AIOHTTP = "lockstep", "lockstep+nccl-inspector", "lockstep-aiohttp"
# name → (label, flags, judged against the budget); RAS polled once per scrape as a site scraping every 15 s with
# the collector's default would, Inspector's settle time and maximum age scaled to the simulator's pace like it
VARIANTS = {
    DEFAULTS: ("lockstep exporter (defaults)", (), True),
    RAS: ("lockstep exporter (+ nccl-ras)", ("--collector.nccl-ras", f"--nccl-ras.poll-interval={TICK_S}"), True),
    INSPECTOR: ("lockstep exporter (+ nccl-inspector)", ("--collector.nccl-inspector",
                f"--nccl-inspector.settle={0.25 / SPEED:g}", f"--nccl-inspector.max-age={90 / SPEED:g}"), True),
    AIOHTTP: ("lockstep exporter (defaults, no fast path)", (), False),
}


def start(st: stack.Stack, node: Path, work: Path, exporter_only: bool, compare: bool) -> dict:
    services = {"node_exporter": st.add(stack.start_node_exporter(
        ["--collector.disable-defaults", "--collector.infiniband", f"--path.sysfs={node / 'sys'}"], work / "ne"))}
    for name, (_, flags, _) in VARIANTS.items():
        if name == AIOHTTP and not compare:
            continue
        command = (["-c", _WITHOUT_FAST_PATH] if name == AIOHTTP else
                   ["-c", *_EXPORTER_ONLY] if exporter_only else ["-m", "lockstep"])
        services[name] = st.add(stack.start_on_port(name, lambda port, command=command, flags=flags: [
            sys.executable, *command, "exporter", f"--web.listen-address=127.0.0.1:{port}", f"--sim.node-root={node}",
            *flags], work / name, ready_path="/metrics"))
    return services


def report(results: dict, rss: dict, scrapes: int, mode: str) -> bool:
    ne, ls = results["node_exporter"], results[DEFAULTS]
    print(f"node: 8 GPUs, 8 HCAs, 8 NICs, Lustre + NFS + NVMe, the middle node of a 3-node job (simulator at "
          f"{SPEED}x); {scrapes} gzip scrapes each, interleaved, {mode}")
    print(f"{'':44}{'CPU/scrape':>12}{'p50':>10}{'p99':>10}{'RSS':>10}{'series':>8}")
    for name, r in results.items():
        label = "node_exporter (infiniband only)" if name == "node_exporter" else VARIANTS[name][0]
        print(f"{label:44}{r['cpu'] * 1e3:>9.2f} ms{r['p50'] * 1e3:>7.2f} ms{r['p99'] * 1e3:>7.2f} ms"
              f"{rss[name] / 1e6:>7.1f} MB{r['samples']:>8}")
    print(f"ratio lockstep/node_exporter: CPU per scrape {ls['cpu'] / ne['cpu']:.2f}, p99 {ls['p99'] / ne['p99']:.2f}, "
          f"RSS {rss[DEFAULTS] / rss['node_exporter']:.2f}")
    if AIOHTTP in results:
        slow = results[AIOHTTP]
        print(f"ratio with/without the fast path: CPU per scrape {ls['cpu'] / slow['cpu']:.2f}, p99 "
              f"{ls['p99'] / slow['p99']:.2f} (without it: {slow['cpu'] / ne['cpu']:.2f} of node_exporter's CPU)")
    ok = True
    for name, r in results.items():
        if name == "node_exporter" or not VARIANTS[name][2]:
            continue
        if name != DEFAULTS:
            print(f"{VARIANTS[name][0]}: CPU per scrape {r['cpu'] / ne['cpu']:.2f} of node_exporter's; to the "
                  f"defaults: CPU {r['cpu'] / ls['cpu']:.2f}, p99 {r['p99'] / ls['p99']:.2f}, "
                  f"RSS {rss[name] / rss[DEFAULTS]:.2f}, series +{r['samples'] - ls['samples']}")
        checks = [("CPU/scrape ratio", r["cpu"] / ne["cpu"], BUDGET["cpu_ratio"], "{:.2f}"),
                  ("p99 scrape (ms)", r["p99"] * 1e3, BUDGET["p99_s"] * 1e3, "{:.2f}"),
                  ("RSS (MB)", rss[name] / 1e6, BUDGET["rss_bytes"] / 1e6, "{:.1f}")]
        if name == DEFAULTS:   # the series budget counts the default collectors only
            checks.append(("series", r["samples"], BUDGET["series"], "{:.0f}"))
        print(f"{VARIANTS[name][0]}:")
        ok = report_budgets(checks) and ok
    return ok


def report_budgets(checks: list[tuple]) -> bool:
    """Print each (name, value, limit[, format]) against its budget; whether all are met."""
    ok = True
    for name, value, limit, *fmt in checks:
        fmt = fmt[0] if fmt else "{:.2f}"
        ok &= value <= limit
        print(f"budget {name:22} {fmt.format(value):>8} <= {fmt.format(limit):>7}  {'ok' if value <= limit else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=240)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--back-to-back", action="store_true",
                        help="scrape back to back instead of once per simulator tick (most scrapes then see "
                             "unchanged data: cheaper, less like Prometheus)")
    parser.add_argument("--compare-fast-path", action="store_true",
                        help="also run the defaults with every scrape through aiohttp (the fast path for plain scrapes "
                             "off) and print the ratio")
    parser.add_argument("--exporter-only", action="store_true",
                        help="load only the exporter subcommand of `lockstep` (diagnoses RSS from other imports)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-node-") as tmp, stack.Stack() as st:
        work = Path(tmp)
        node = live_node(st, work, nodes=3)
        services = start(st, node, work, args.exporter_only, args.compare_fast_path)
        if args.back_to_back:
            results = measure(services, args.scrapes, args.warmup)
        else:
            results = measure(services, args.scrapes, args.warmup, interval=TICK_S)
        rss = {name: rss_bytes(s.proc.pid) for name, s in services.items()}
        idle = idle_cpu(services)
        heavy = heavy_libraries(services["lockstep"].proc.pid)
    ok = report(results, rss, args.scrapes, "back to back" if args.back_to_back else "one round per tick")
    print("idle CPU (no scrapes, simulator still ticking; 2 ms/s resolution): " + ", ".join(
        f"{name} {value * 1e3:.1f} ms/s" for name, value in idle.items()) + f" (nccl-ras polls every {TICK_S * 1e3:.0f} ms)")
    if heavy:
        print(f"note: the agent process has {', '.join(heavy)} loaded: a `lockstep` subcommand module imports them "
              "at startup; the exporter itself needs none")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
