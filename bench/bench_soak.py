"""Soak and chaos of the node agent: ``lockstep exporter --sim.node-root`` on one full simulated H100
node (a live ``lockstep sim run``), scraped back to back ``--scrapes`` times (default 100,000), its
RSS (VmRSS) and open descriptors (/proc/<pid>/fd) sampled every ``--every`` scrapes. After the
warm-up (the first 10 % of the scrapes) both must stay within 5 % of their post-warm-up median:
a leak of one descriptor or a few bytes per scrape shows over 100,000 scrapes.

Chaos in the same run: between 40 % and 45 % of the scrapes the node's sysfs tree is moved away
while the simulator keeps writing: every scrape must still answer 200; the infiniband collector's
success while it is gone and after it returns, and the descriptors before and after, are printed
(figures, not a budget: the held descriptors still read the moved files, and the simulator may
write a fresh tree in its place).

    python bench/bench_soak.py [--scrapes 100000] [--every 1000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_exporter import Scraper  # noqa: E402
from bench_node_agent import live_node, rss_bytes  # noqa: E402
from lockstep import stack  # noqa: E402

FLAT = 0.05


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def collector_success(body: str, name: str) -> float | None:
    prefix = f'lockstep_scrape_collector_success{{collector="{name}"}} '
    line = next((line for line in body.splitlines() if line.startswith(prefix)), None)
    return None if line is None else float(line.split()[-1])


def soak(pid: int, scrape: Scraper, node: Path, n: int, every: int) -> tuple[list, list, dict]:
    samples, chaos, sys_dir, away = [], [], node / "sys", node / "sys.away"
    vanish, back = int(n * 0.40), int(n * 0.45)
    for i in range(1, n + 1):
        if i == vanish:
            chaos.append(("before", open_fds(pid)))
            sys_dir.rename(away)
        elif i == back:
            away.rename(sys_dir)
        _, body = scrape()  # raises on anything but 200
        if i == vanish + 10:
            chaos.append(("vanished", collector_success(body, "infiniband")))
        if i == back + 10:
            chaos.append(("returned", collector_success(body, "infiniband")))
            chaos.append(("after", open_fds(pid)))
        if i % every == 0:
            samples.append((i, rss_bytes(pid), open_fds(pid)))
    return samples, chaos, {"vanish_at": vanish, "back_at": back}


def flat(values: list[float]) -> tuple[float, bool]:
    median = statistics.median(values)
    worst = max(abs(v - median) / median for v in values)
    return worst, worst <= FLAT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, stack.Stack() as st:
        work = Path(tmp)
        node = live_node(st, work)
        agent = st.add(stack.start_on_port("lockstep", lambda port: [
            sys.executable, "-m", "lockstep", "exporter", f"--web.listen-address=127.0.0.1:{port}",
            f"--sim.node-root={node}"], work / "ls", ready_path="/metrics"))
        samples, chaos, at = soak(agent.proc.pid, Scraper(agent.url), node, args.scrapes, args.every)
    # After the warm-up, outside the chaos window (the collectors drop and reopen what they hold there).
    warm = [s for s in samples if s[0] > args.scrapes * 0.10 and not at["vanish_at"] <= s[0] <= at["back_at"] + args.every]
    rss_dev, rss_ok = flat([s[1] for s in warm])
    fd_dev, fd_ok = flat([s[2] for s in warm])
    print(f"node agent soak: {args.scrapes} scrapes of a full simulated node, sampled every {args.every}")
    print(f"  RSS after warm-up: {min(s[1] for s in warm) / 1e6:.1f}-{max(s[1] for s in warm) / 1e6:.1f} MB, "
          f"worst deviation from the median {rss_dev:.1%} (budget {FLAT:.0%}: {'ok' if rss_ok else 'MISSED'})")
    print(f"  open descriptors after warm-up: {min(s[2] for s in warm)}-{max(s[2] for s in warm)}, "
          f"worst deviation {fd_dev:.1%} ({'ok' if fd_ok else 'MISSED'})")
    chaos_d = dict(chaos)
    print(f"  chaos: sysfs moved away at scrape {at['vanish_at']}, back at {at['back_at']}: every scrape answered 200; "
          f"infiniband collector success {chaos_d.get('vanished')} while gone, {chaos_d.get('returned')} after "
          f"; descriptors {chaos_d.get('before')} before, "
          f"{chaos_d.get('after')} after ")
    return 0 if rss_ok and fd_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
