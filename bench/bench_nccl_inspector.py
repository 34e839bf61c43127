"""The node agent's scrape with NCCL Inspector data: 8 GPUs x 4 communicators, against the default collectors alone.

One simulated H100 node (8 GPUs, 8 HCAs, 8 NICs, Lustre + NFS + NVMe) in the middle of a three-node job, written
in process by the simulator's own writers: its 8 Inspector files in NCCL 2.30's layout, each with 4 communicators
(DP, TP, and the PP pairs to the previous and the next node: 5 collective and 4 point-to-point buckets). Two
scrapers built as ``lockstep exporter --sim.node-root`` builds them, in this process: the default collectors, and
the defaults with ``--collector.nccl-inspector``; scraped alternately, CPU time (``time.process_time``) per whole
scrape (collect, encode, render) measured around each. Two cases: the files unchanged between scrapes (NCCL
rewrites them every 30 s or more, Prometheus scrapes every 15 s or less: most scrapes), and every file rewritten
before every scrape (each one parsed again: the worst case).

Printed: CPU per scrape of both, series, and the ratio with/without (the budget of docs/architecture.md is for
the default collectors; this is what enabling the collector adds to it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters import cli  # noqa: E402
from lockstep.exporters.catalog import nccl_inspector as ni  # noqa: E402
from lockstep.simulator.live import TreeSink  # noqa: E402
from lockstep.simulator.model import Model  # noqa: E402
from lockstep.simulator.scenario import parse_scenario  # noqa: E402

SCENARIO = {"name": "bench-inspector", "seed": 1, "duration_s": 600, "sample_period_s": 5,
            "cluster": {"nodes": 3, "gpus_per_node": 8, "nodes_per_rack": 3, "rack_budget_watts": 90000},
            "job": {"job_id": "1", "nodes": 3, "step_time_s": 1.5, "storage_read_bytes_per_step": 1.0e9}}


def write_node(root: Path) -> Path:
    """node01 of the three-node job after 30 simulated seconds: its trees and Inspector files."""
    model = Model(parse_scenario(SCENARIO, "bench.yaml"))
    sink = TreeSink(model.topo, root, "1", nccl_inspector="2.30")
    for state in model.states(7):
        sink.write(state)
    sink.steps.close()
    return root / "node01"


def scraper(node: Path, *flags: str):
    parser = __import__("argparse").ArgumentParser()
    cli.add_parser(parser.add_subparsers(), list(flags))
    args = parser.parse_args(["exporter", f"--sim.node-root={node}", *flags])
    return cli.build_scraper(cli.config_from_args(args), args._specs)


def touch(files: list[Path], rewrite: bool) -> None:
    """As NCCL's next dump (new content, parsed again), a second old: past the settle time, within the max age."""
    when = time.time() - 1.0
    for path in files:
        if rewrite:
            path.write_bytes(path.read_bytes())
        os.utime(path, (when, when))


def measure(scrapers: dict, files: list[Path], scrapes: int, rewrite: bool) -> dict:
    cpu = {name: [] for name in scrapers}
    series = {}
    for _ in range(3):                            # the first scrapes discover devices and fill caches
        touch(files, True)
        for s in scrapers.values():
            s.render()
    for i in range(scrapes):
        if rewrite or i == 0:
            touch(files, True)
        for name, s in (scrapers.items() if i % 2 else reversed(scrapers.items())):
            started = time.process_time()
            text = s.render()
            cpu[name].append(time.process_time() - started)
            series[name] = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return {name: (statistics.mean(v), series[name]) for name, v in cpu.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-inspector-") as tmp:
        node = write_node(Path(tmp))
        files = sorted((node / "nccl-inspector").glob("*.prom"))
        scrapers = {"defaults": scraper(node), "defaults + nccl-inspector": scraper(node, "--collector.nccl-inspector",
                                                                        "--nccl-inspector.max-age=3600")}
        try:
            touch(files, False)
            text = scrapers["defaults + nccl-inspector"].render()
            comms = {line.split('comm_name="')[1].split('"')[0] for line in text.splitlines()
                     if line.startswith(ni.EXEC_TIME.name + "{") or line.startswith(ni.P2P_EXEC_TIME.name + "{")}
            print(f"node: 8 GPUs, 8 HCAs, 8 NICs, Lustre + NFS + NVMe; {len(files)} Inspector files (NCCL 2.30), "
                  f"communicators per GPU: {len(comms)} ({', '.join(sorted(comms))}); {args.scrapes} scrapes each, "
                  "alternating, in process")
            for rewrite in (False, True):
                results = measure(scrapers, files, args.scrapes, rewrite)
                base, with_ = results["defaults"], results["defaults + nccl-inspector"]
                print(f"files {'rewritten before every scrape' if rewrite else 'unchanged between scrapes'}:")
                for name, (cpu, series) in results.items():
                    print(f"  {name:28} {cpu * 1e3:7.2f} ms CPU/scrape {series:6} series")
                print(f"  ratio (defaults + nccl-inspector) / defaults: CPU {with_[0] / base[0]:.2f}, "
                      f"series {with_[1] / base[1]:.2f}; the collector's own: {(with_[0] - base[0]) * 1e3:.2f} ms, "
                      f"{with_[1] - base[1]} series")
        finally:
            for s in scrapers.values():
                s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
