"""The node agent with a year of daily validation results for 50 tests, against the same agent with a week
of them and without any.

One simulated H100 node (``lockstep sim run``, as bench_node_agent.py). Two results directories are filled
through the real store (``lockstep.validation.store.Store.write``; on /dev/shm where there is one, so that filling
them is quick) with 7 and with 365 daily runs of 50 tests built from the real captures in
tests/fixtures/validation (jittered ±3 %): nccl-tests, 6 collectives x 4 scales; ib_write_bw and ib_read_bw
on 8 HCAs; DCGM levels 1 and 3; gpu-burn; 7 fio jobs. Four processes are scraped interleaved once per
simulator tick: node_exporter's infiniband collector (the anchor of docs/architecture.md's budgets) and ``lockstep exporter``
with no results, a week of them and a year of them, while a writer stores one new result in both
directories every 2 s (each re-parsed by its agent: the year's file is 365 runs long). Printed: CPU per
scrape, p50/p99, RSS and series of each, and the budgets: p99 < 25 ms, RSS < 80 MB, <= 1,500 series
(docs/architecture.md); a year of history costing no more than 10 % above a week of it per scrape (the same series); validation
series costing no more CPU each than the agent's other series. Exit status 1 when one is missed.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_exporter import measure
from bench_node_agent import TICK_S, live_node, report_budgets, rss_bytes

from lockstep import stack
from lockstep.validation.parsers import parse_file
from lockstep.validation.result import from_parsed
from lockstep.validation.store import Store

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "validation"
BUDGET = {"p99_s": 0.025, "rss_bytes": 80e6, "series": 1500, "year_over_week_cpu": 1.10, "per_series_cpu": 1.0}
DAY = 86400.0
NODE = "node00"   # the simulated node's name: the agent reads <dir>/node00


def tests() -> list[tuple[str, str, int, object]]:
    """(kind, test, scale, parsed output) for the 50 tests."""
    nccl = ["nccl_allreduce", "nccl_allgather", "nccl_alltoall", "nccl_broadcast", "nccl_reduce", "nccl_reducescatter"]
    out = [("nccl", name.replace("nccl_", "") + "_perf", scale, parse_file("nccl", FIXTURES / f"{name}.log"))
           for name in nccl for scale in (1, 2, 8, 16)]
    ib = parse_file("perftest", FIXTURES / "ib_loopback_all_sizes.log")
    out += [("perftest", f"{program}/mlx5_{hca}", 1, ib) for program in ("ib_write_bw", "ib_read_bw") for hca in range(8)]
    out += [("dcgm-diag", f"diag-r{level}", 1, parse_file("dcgm-diag", FIXTURES / "dcgm_diag_r3_pass.constructed.json"))
            for level in (1, 3)]
    out.append(("gpu-burn", "gpu-burn", 1, parse_file("gpu-burn", FIXTURES / "gpu_burn.log")))
    fio = parse_file("fio", FIXTURES / "disk_performance.log")
    out += [("fio", f"fio-{job}", 1, fio) for job in ("randrw", "seqread", "seqwrite", "lustre-read", "lustre-write",
                                                       "nfs-read", "scratch-randrw")]
    assert len(out) == 50
    return out


def result(kind: str, test: str, scale: int, parsed, started: float, rng: random.Random):
    jitter = rng.uniform(0.97, 1.03)
    figures = tuple(replace(f, value=f.value * jitter) if f.unit in ("bytes_per_second", "per_second") else f
                    for f in parsed.figures)
    nodes = (NODE,) + tuple(f"node{i:02d}" for i in range(1, scale))
    return from_parsed(replace(parsed, figures=figures), test, nodes, started, 60.0, kind)


def fill(root: Path, days: int) -> tuple[float, int]:
    """A year of daily results; (seconds per store write, bytes of the node's directory)."""
    store, rng, catalogue = Store(root), random.Random(1), tests()
    start, t0, writes = time.time() - days * DAY, time.perf_counter(), 0
    for day in range(days):
        for kind, test, scale, parsed in catalogue:
            r = result(kind, test, scale, parsed, start + day * DAY, rng)
            store.write(r, only=(NODE,))   # the copies for the other nodes of a multi-node test are theirs
            writes += 1
    size = sum(p.stat().st_size for p in (root / NODE).rglob("*") if p.is_file())
    return (time.perf_counter() - t0) / writes, size


def writer(roots: list[Path], stop: threading.Event) -> None:
    stores, rng, catalogue = [Store(root) for root in roots], random.Random(2), tests()
    while not stop.wait(2.0):
        kind, test, scale, parsed = rng.choice(catalogue)
        for store in stores:
            store.write(result(kind, test, scale, parsed, time.time(), rng), only=(NODE,))


AGENTS = ("lockstep", "lockstep+1 week", "lockstep+1 year")


def start(st: stack.Stack, node: Path, work: Path, dirs: dict[str, Path]) -> dict:
    services = {"node_exporter": st.add(stack.start_node_exporter(
        ["--collector.disable-defaults", "--collector.infiniband", f"--path.sysfs={node / 'sys'}"], work / "ne"))}
    for name, directory in dirs.items():
        services[name] = st.add(stack.start_on_port(name, lambda port, d=directory: [
            sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
            f"--sim.node-root={node}", f"--validation.results-dir={d}"], work / name.replace(" ", "-"),
            ready_path="/metrics"))
    return services


def report(results: dict, rss: dict, write_s: float, size: int, days: int) -> bool:
    print(f"results: 50 tests x {days} daily runs in the store ({write_s * 1e3:.2f} ms per write, "
          f"{size / 1e6:.1f} MB for the node); a new result every 2 s during the scrapes")
    print(f"{'':28}{'CPU/scrape':>12}{'p50':>10}{'p99':>10}{'RSS':>10}{'series':>8}")
    for name, r in results.items():
        print(f"{name:28}{r['cpu'] * 1e3:>9.2f} ms{r['p50'] * 1e3:>7.2f} ms{r['p99'] * 1e3:>7.2f} ms"
              f"{rss[name] / 1e6:>7.1f} MB{r['samples']:>8}")
    none, week, year = (results[name] for name in AGENTS)
    ne = results["node_exporter"]
    added = year["samples"] - none["samples"]
    per_series = ((year["cpu"] - none["cpu"]) / added) / (none["cpu"] / none["samples"])
    print(f"a year over a week of results: CPU per scrape {year['cpu'] / week['cpu']:.2f}, p99 "
          f"{year['p99'] / week['p99']:.2f}; the results add {added} series at {per_series:.2f}x the CPU of the "
          f"agent's other series; vs node_exporter infiniband: CPU {year['cpu'] / ne['cpu']:.2f} "
          f"(without results {none['cpu'] / ne['cpu']:.2f})")
    checks = [("p99 scrape (ms)", year["p99"] * 1e3, BUDGET["p99_s"] * 1e3),
              ("RSS (MB)", rss["lockstep+1 year"] / 1e6, BUDGET["rss_bytes"] / 1e6),
              ("series", year["samples"], BUDGET["series"]),
              ("CPU year / week", year["cpu"] / week["cpu"], BUDGET["year_over_week_cpu"]),
              ("CPU per series ratio", per_series, BUDGET["per_series_cpu"])]
    return report_budgets(checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=240)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--days", type=int, default=365)
    args = parser.parse_args()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-validation-") as tmp, \
            tempfile.TemporaryDirectory(prefix="lockstep-bench-results-", dir=shm) as results, stack.Stack() as st:
        work, dirs = Path(tmp), dict(zip(AGENTS, (Path(results) / "none", Path(results) / "week", Path(results) / "year")))
        fill(dirs["lockstep+1 week"], 7)
        write_s, size = fill(dirs["lockstep+1 year"], args.days)
        node = live_node(st, work)
        services = start(st, node, work, dirs)
        stop = threading.Event()
        background = threading.Thread(target=writer, args=(list(dirs.values())[1:], stop), daemon=True)
        background.start()
        try:
            results = measure(services, args.scrapes, args.warmup, interval=TICK_S)
        finally:
            stop.set()
            background.join()
        rss = {name: rss_bytes(s.proc.pid) for name, s in services.items()}
    return 0 if report(results, rss, write_s, size, args.days) else 1


if __name__ == "__main__":
    raise SystemExit(main())
