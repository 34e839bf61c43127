"""Soak and chaos of the node agent: ``lockstep exporter --sim.node-root`` on one full simulated H100
node (a live ``lockstep sim run``), scraped back to back ``--scrapes`` times (default 100,000), its
RSS (VmRSS) and open descriptors (/proc/<pid>/fd) sampled every ``--every`` scrapes. After the
warm-up (the first 10 % of the scrapes) both must stay within 5 % of their post-warm-up median:
a leak of one descriptor or a few bytes per scrape shows over 100,000 scrapes.

Chaos in the same run, at 40 % of the scrapes, modelled on what hardware does (the simulator is
paused meanwhile, as an unplugged device is not written): one HCA is hot-unplugged (its directory
leaves ``sys/class/infiniband``), then the whole class directory goes (the RDMA core unloaded); then
both return as new directories and the simulator resumes. Every scrape must answer 200; printed: the
unplugged HCA's series and the descriptors while it is gone, the infiniband collector's success
while the class is gone, and that the returned HCA's counter advances again (read through new
descriptors, not the old files). (Behaviour checks of the same: tests/exporters/fabric/test_infiniband.py.)

``--host`` soaks the agent on this host's own hardware instead (its default collectors; the real NVML
where the host has NVIDIA GPUs): no simulator and no chaos, the same sampling and flatness check.

    python bench/bench_soak.py [--scrapes 100000] [--every 1000] [--host]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_exporter import Scraper
from bench_node_agent import live_node, rss_bytes

from lockstep import stack

FLAT = 0.05
HCA = "mlx5_3"
SETTLE = 10          # scrapes after each chaos step before its figures are read
ADVANCE = 400        # scrapes after the return within which the returned HCA's counter must have moved


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def sample(body: str, name: str, labels: str) -> float | None:
    braces = rf"\{{{re.escape(labels)}\}}" if labels else ""
    found = re.search(rf"^{name}{braces} (\S+)$", body, re.M)
    return None if found is None else float(found.group(1))


class Chaos:
    """The hardware events, one per scrape index, and what each one showed."""

    def __init__(self, pid: int, sim_pid: int, node: Path, work: Path, at: int) -> None:
        self.pid, self.sim_pid, self.at = pid, sim_pid, at
        self.cls, self.away = node / "sys" / "class" / "infiniband", work / "chaos"
        self.steps = {at: self.unplug, at + SETTLE: self.unload, at + 2 * SETTLE: self.back}
        self.figures: dict[str, object] = {}

    def __call__(self, i: int, body: str) -> None:
        if i in self.steps:
            self.steps[i](body)
        elif i == self.at + 3 * SETTLE:
            self.figures["after"] = open_fds(self.pid)
            self.figures["success after"] = sample(body, "lockstep_scrape_collector_success", 'collector="infiniband"')
            self.figures["counter at return"] = self.counter(body)
        elif i == self.at + 3 * SETTLE + ADVANCE:
            self.figures["counter advanced"] = (self.counter(body) or 0) > (self.figures["counter at return"] or 0)

    def counter(self, body: str) -> float | None:
        return sample(body, "lockstep_ib_port_transmit_bytes_total", f'device="{HCA}",port="1"')

    def unplug(self, body: str) -> None:
        self.figures["before"], self.figures["counter before"] = open_fds(self.pid), self.counter(body)
        os.kill(self.sim_pid, signal.SIGSTOP)
        self.away.mkdir()
        (self.cls / HCA).rename(self.away / HCA)

    def unload(self, body: str) -> None:
        self.figures["unplugged: series"] = self.counter(body)
        self.figures["unplugged: descriptors"] = open_fds(self.pid)
        self.cls.rename(self.away / "infiniband")

    def back(self, body: str) -> None:
        self.figures["class gone: success"] = sample(body, "lockstep_scrape_collector_success",
                                                     'collector="infiniband"')
        self.figures["class gone: descriptors"] = open_fds(self.pid)
        # new directories and files, as a driver creates them on load; the old ones are deleted
        shutil.copytree(self.away / "infiniband", self.cls)
        shutil.copytree(self.away / HCA, self.cls / HCA)
        shutil.rmtree(self.away)
        os.kill(self.sim_pid, signal.SIGCONT)


def soak(pid: int, scrape: Scraper, chaos: Chaos | None, n: int, every: int) -> tuple[list, str]:
    """RSS and descriptors every ``every`` scrapes; and the last scrape's body."""
    samples, body = [], ""
    for i in range(1, n + 1):
        _, body = scrape()  # raises on anything but 200
        if chaos is not None:
            chaos(i, body)
        if i % every == 0:
            samples.append((i, rss_bytes(pid), open_fds(pid)))
    return samples, body


def flat(values: list[float]) -> tuple[float, bool]:
    median = statistics.median(values)
    worst = max(abs(v - median) / median for v in values)
    return worst, worst <= FLAT


def report(args: argparse.Namespace, samples: list, chaos: Chaos | None, what: str) -> bool:
    # After the warm-up, outside the chaos window (the collectors drop and reopen what they hold there).
    quiet = range(chaos.at - args.every, chaos.at + 3 * SETTLE + ADVANCE + args.every) if chaos else range(0)
    warm = [s for s in samples if s[0] > args.scrapes * 0.10 and s[0] not in quiet]
    rss_dev, rss_ok = flat([s[1] for s in warm])
    fd_dev, fd_ok = flat([s[2] for s in warm])
    print(f"node agent soak: {args.scrapes} scrapes of {what}, sampled every {args.every}")
    print(f"  RSS after warm-up: {min(s[1] for s in warm) / 1e6:.1f}-{max(s[1] for s in warm) / 1e6:.1f} MB, "
          f"worst deviation from the median {rss_dev:.1%} (budget {FLAT:.0%}: {'ok' if rss_ok else 'MISSED'})")
    print(f"  open descriptors after warm-up: {min(s[2] for s in warm)}-{max(s[2] for s in warm)}, "
          f"worst deviation {fd_dev:.1%} ({'ok' if fd_ok else 'MISSED'})")
    if chaos is None:
        return rss_ok and fd_ok
    f = chaos.figures
    print(f"  chaos at scrape {chaos.at} (every scrape answered 200): descriptors {f.get('before')} before; "
          f"{HCA} unplugged: its series {'absent' if f.get('unplugged: series') is None else 'STILL SERVED'}, "
          f"descriptors {f.get('unplugged: descriptors')}; class directory gone: infiniband success "
          f"{f.get('class gone: success')}, descriptors {f.get('class gone: descriptors')}; back as new "
          f"directories: success {f.get('success after')}, descriptors {f.get('after')}, {HCA} counter "
          f"{'advancing' if f.get('counter advanced') else 'NOT advancing'} within {ADVANCE} scrapes")
    return rss_ok and fd_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--host", action="store_true", help="this host's own hardware: no simulator, no chaos")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, stack.Stack() as st:
        work = Path(tmp)
        where, chaos = [], None
        if not args.host:
            node = live_node(st, work, days=10)   # 4 wall hours at 60x: it outlasts the soak
            where = [f"--sim.node-root={node}"]
        agent = st.add(stack.start_on_port("lockstep", lambda port: [
            sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}", *where],
            work / "ls", ready_path="/metrics"))
        if not args.host:
            sim = next(s for s in st.services if s.name == "sim")
            chaos = Chaos(agent.proc.pid, sim.proc.pid, node, work, int(args.scrapes * 0.40))
        samples, body = soak(agent.proc.pid, Scraper(agent.url), chaos, args.scrapes, args.every)
    gpus = sample(body, "lockstep_node_gpus_visible", "") if args.host else None
    what = f"this host ({gpus if gpus is None else int(gpus)} GPUs visible to NVML)" if args.host \
        else "a full simulated node"
    return 0 if report(args, samples, chaos, what) else 1


if __name__ == "__main__":
    raise SystemExit(main())
