"""Fabric collectors vs node_exporter's infiniband collector on the same simulated 8-HCA/8-NIC node.

Runs Debian's node_exporter (``--collector.disable-defaults --collector.infiniband``) and the lockstep
exporter (``--collector.disable-defaults --collector.infiniband --collector.roce --collector.pfc``)
against one node tree, scrapes each N times over HTTP and prints, for both: process CPU per scrape
(utime+stime deltas from /proc/<pid>/stat), p50/p99 scrape latency, samples per scrape, and the
ratios. Budget (docs/architecture.md): lockstep's fabric collectors cost no more CPU per scrape than
node_exporter's infiniband collector alone.

The tree comes from the simulator (``lockstep sim run``) when it is available, otherwise it is
generated here in the shape of the real mlx5 capture (tests/fixtures/sysfs/real) with the counters
the simulator writes.
"""
from __future__ import annotations

import argparse
import gzip
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep import stack  # noqa: E402

MLX5 = REPO / "tests" / "fixtures" / "sysfs" / "real" / "class" / "infiniband" / "mlx5_0"
HW_EXTRA = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "rx_icrc_encapsulated")
TICKS = os.sysconf("SC_CLK_TCK")


def ethtool_text(gpu: int) -> str:
    rows = [("rx_packets", 0), ("tx_packets", 0), ("rx_bytes", 0), ("tx_bytes", 0),
            ("rx_vport_rdma_unicast_packets", 10**9 + gpu), ("tx_vport_rdma_unicast_packets", 10**9 + gpu),
            ("rx_packets_phy", 10**9), ("tx_packets_phy", 10**9), ("rx_bytes_phy", 10**12), ("tx_bytes_phy", 10**12),
            ("rx_discards_phy", 0), ("tx_discards_phy", 0), ("rx_pause_ctrl_phy", 0), ("tx_pause_ctrl_phy", 0)]
    for p in range(8):
        rows += [(f"rx_prio{p}_bytes", 10**12 * (p == 3)), (f"rx_prio{p}_packets", 10**9 * (p == 3)),
                 (f"tx_prio{p}_bytes", 10**12 * (p == 3)), (f"tx_prio{p}_packets", 10**9 * (p == 3))]
        if p == 3:
            for d in ("rx", "tx"):
                rows += [(f"{d}_prio{p}_pause", 1234), (f"{d}_prio{p}_pause_duration", 56789),
                         (f"{d}_prio{p}_pause_transition", 617)]
    rows += [("tx_pause_storm_warning_events", 0), ("tx_pause_storm_error_events", 0)]
    return "NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in rows)


def generate(node: Path, hcas: int = 8) -> Path:
    """One node tree: <node>/sys/class/infiniband/mlx5_<i> and <node>/ethtool/<iface>/{statistics,driver}."""
    for i in range(hcas):
        dev = node / "sys" / "class" / "infiniband" / f"mlx5_{i}"
        shutil.copytree(MLX5, dev)
        for base, _dirs, files in os.walk(dev):
            os.chmod(base, 0o755)
            for name in files:
                os.chmod(os.path.join(base, name), 0o644)
        (dev / "ports" / "1" / "rate").write_text("400 Gb/sec (4X NDR)\n")
        (dev / "ports" / "1" / "phys_state").write_text("5: LinkUp\n")
        for n, name in enumerate(HW_EXTRA):
            (dev / "ports" / "1" / "hw_counters" / name).write_text(f"{1000 * i + n}\n")
        iface = f"ens{i + 1}np0"
        (dev / "device" / "net" / iface).mkdir(parents=True)
        eth = node / "ethtool" / iface
        eth.mkdir(parents=True)
        (eth / "statistics").write_text(ethtool_text(i))
        (eth / "driver").write_text("mlx5_core\n")
    return node


def simulated_node(workdir: Path) -> Path | None:
    """A one-node tree written by ``lockstep sim run`` (None if the simulator cannot run here)."""
    scenario = workdir / "bench-node.yaml"
    scenario.write_text("name: bench-node\nseed: 1\nduration_s: 60\nsample_period_s: 5\n"
                        "cluster: {nodes: 1, gpus_per_node: 8, nodes_per_rack: 1, rack_budget_watts: 60000}\n"
                        "job: {job_id: '1', nodes: 1, step_time_s: 1.5}\n")
    root = workdir / "sim"
    try:
        proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "run", str(scenario), "--root", str(root),
                               "--speed", "60", "--duration", "10"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        return None
    node = root / "node00"
    hcas = node / "sys" / "class" / "infiniband"
    if proc.returncode != 0 or not hcas.is_dir() or len(os.listdir(hcas)) < 8 or not (node / "ethtool").is_dir():
        print(f"simulator unavailable ({(proc.stderr or '').strip().splitlines()[-1:]}); generating the tree")
        return None
    return node


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all threads), from /proc/<pid>/stat fields 14 and 15."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Scraper:
    """A keep-alive HTTP client sending what Prometheus sends (gzip accepted), timing each scrape."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)

    def __call__(self) -> tuple[float, str]:
        started = time.perf_counter()
        self.conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        resp = self.conn.getresponse()
        body = resp.read()
        elapsed = time.perf_counter() - started
        if resp.status != 200:
            raise RuntimeError(f"scrape failed: HTTP {resp.status}")
        if resp.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return elapsed, body.decode()


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(services: dict, n: int, warmup: int, interval: float = 0.0) -> dict:
    """Interleaved scrapes of every service, back to back, or one round every ``interval`` seconds
    (then the CPU also counts what each process does between scrapes). Each round starts one service further
    on, so each is scraped in each place of the round equally often: where a process comes in the round moves
    its CPU per scrape (docs/architecture.md, performance notes, "A fairer bench")."""
    scrapers = {name: Scraper(service.url) for name, service in services.items()}
    for _ in range(warmup):
        for scrape in scrapers.values():
            scrape()
    before = {name: cpu_seconds(s.proc.pid) for name, s in services.items()}
    latency: dict[str, list[float]] = {name: [] for name in services}
    bodies, next_round = {}, time.monotonic()
    names = list(scrapers)
    for i in range(n):  # interleaved, so all see the same machine noise
        next_round += interval
        for name in names[i % len(names):] + names[:i % len(names)]:
            seconds, bodies[name] = scrapers[name]()
            latency[name].append(seconds)
        if interval:
            time.sleep(max(0.0, next_round - time.monotonic()))
    cpu = {name: (cpu_seconds(s.proc.pid) - before[name]) / n for name, s in services.items()}
    return {name: {"cpu": cpu[name], "p50": p(latency[name], 0.5), "p99": p(latency[name], 0.99),
                   "samples": sum(1 for line in bodies[name].splitlines() if line and not line.startswith("#")),
                   "collectors": collector_seconds(bodies[name])}
            for name in services}


def collector_seconds(body: str) -> float:
    """Sum of the exporter's own per-collector durations in its last scrape (wall time, in-process)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(("node_scrape_collector_duration_seconds{", "lockstep_scrape_collector_duration_seconds{")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scrapes", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--generate", action="store_true", help="skip the simulator, generate the tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-") as tmp, stack.Stack() as st:
        work = Path(tmp)
        node = None if args.generate else simulated_node(work)
        source = "simulator" if node else "generated from the mlx5 fixture shape"
        node = node or generate(work / "gen" / "node00")
        services = {"node_exporter": st.add(stack.start_node_exporter(
            ["--collector.disable-defaults", "--collector.infiniband", f"--path.sysfs={node / 'sys'}"], work / "ne"))}
        services["lockstep"] = st.add(stack.start_on_port("lockstep", lambda port: [
            sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults", "--collector.infiniband", "--collector.roce", "--collector.pfc",
            f"--sim.node-root={node}"], work / "ls", ready_path="/metrics"))
        results = measure(services, args.scrapes, args.warmup)
    ne, ls = results["node_exporter"], results["lockstep"]
    print(f"tree: 8 HCAs + 8 NICs, {source}; {args.scrapes} scrapes each, interleaved")
    print(f"{'':34}{'CPU/scrape':>12}{'p50':>10}{'p99':>10}{'samples':>9}{'collectors (last)':>19}")
    for label, r in (("node_exporter (infiniband)", ne), ("lockstep (infiniband+roce+pfc)", ls)):
        print(f"{label:34}{r['cpu'] * 1e3:>9.2f} ms{r['p50'] * 1e3:>7.2f} ms{r['p99'] * 1e3:>7.2f} ms{r['samples']:>9}"
              f"{r['collectors'] * 1e3:>16.2f} ms")
    print(f"ratio lockstep/node_exporter: CPU per scrape {ls['cpu'] / ne['cpu']:.2f}, p99 {ls['p99'] / ne['p99']:.2f} "
          f"(budget: CPU ratio <= 1.00, p99 < 25 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
