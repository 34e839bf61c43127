"""Soak of the node agent against callers that connect and stall, on one simulated H100 node.

``lockstep exporter --sim.node-root`` (every default collector) is started as a systemd unit without
``LimitNOFILE`` would start it (soft open-files limit 1,024), with ``--web.idle-timeout`` and
``--web.read-header-timeout`` set to ``--timeout`` (short, so a round is short). First the baseline:
scrapes on an otherwise idle agent. Then ``--rounds`` rounds, each opening ``--stalled`` connections
on 127.0.0.1, half silent, half sending a request header that never ends (one more byte every 0.5 s,
which must not extend its deadline), and scraping through it all on new connections (the accept path
is what a flood takes), until the agent has closed every one of them. Printed: scrape latency p50/p99
in the baseline and under the stalled connections and their ratio, the longest any stalled connection
was held against the timeout, the agent's sockets after each round against before, the lines the
agent logged, its soft open-files limit and peak RSS (VmHWM). Budgets: p99 under the stalled
connections < 50 ms, every one dropped within the timeout (+2 s: a connection's time is counted from
its connect, and one the kernel found no room for in the full accept queue waits for its retry, a
second later, before the agent sees it), no
socket left over, at most 5 log lines, peak RSS under the chart's 160 MiB. Exit status 1 when one is
missed. Loopback only; every loop stops by itself.

    python bench/bench_node_agent_stalled.py [--stalled 1000] [--rounds 3] [--timeout 2]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from bench_exporter import p, simulated_node  # noqa: E402
from bench_node_agent import report_budgets  # noqa: E402

HEADER = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
P99_BUDGET_S = 0.050
LOG_LINES_BUDGET = 5
MEMORY_LIMIT_KB = 160 * 1024   # the chart's memory limit for the node agent


class Agent:
    def __init__(self, node: Path, log: Path, timeout: float) -> None:
        self.log = log

        def unit_limits() -> None:   # what a unit without LimitNOFILE gives: a soft limit of 1,024
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))

        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lockstep", "exporter", f"--sim.node-root={node}",
                 "--web.listen-address=127.0.0.1:0", f"--web.idle-timeout={timeout:g}",
                 f"--web.read-header-timeout={timeout:g}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO, preexec_fn=unit_limits)
        deadline = time.monotonic() + 60
        while not (m := re.search(r"address=http://127\.0\.0\.1:(\d+)", self.text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the agent did not start:\n{self.text()}")
            time.sleep(0.05)
        self.port = int(m.group(1))

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> int:
        return self.text().count("\n")

    def sockets(self) -> int:
        count = 0
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                count += os.readlink(f"/proc/{self.proc.pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass
        return count

    def status_kb(self, field: str) -> int:
        return int(re.search(rf"{field}:\s+(\d+)", Path(f"/proc/{self.proc.pid}/status").read_text()).group(1))

    def soft_nofile(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
        return -1

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def scrape(port: int) -> float:
    """One scrape as Prometheus sends it, on a new connection: seconds to the whole answer."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(1 << 16):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"scrape failed: {answer[:80]!r}")
    return time.perf_counter() - started


def closed(sock: socket.socket) -> bool:
    try:
        while True:
            if not sock.recv(4096):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def stalled_round(agent: Agent, count: int, timeout: float) -> dict:
    """``count`` stalled connections opened at once, scrapes until the agent closed them all; each
    connection's end is seen (a selector: readable at end of file) while the others are still opening."""
    selector = selectors.DefaultSelector()
    opened, ended, trickling = {}, {}, []

    def see_ends() -> None:
        now = time.monotonic()
        for key, _ in selector.select(0):
            if closed(key.fileobj):
                ended[key.fileobj] = now
                selector.unregister(key.fileobj)

    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", agent.port), timeout=10)
        if i % 2:
            sock.sendall(HEADER)
            trickling.append(sock)
        sock.setblocking(False)
        opened[sock] = time.monotonic()
        selector.register(sock, selectors.EVENT_READ)
        see_ends()
    latencies, next_trickle = [], 0.0
    deadline = time.monotonic() + timeout + 30
    while len(ended) < count and time.monotonic() < deadline:
        latencies.append(scrape(agent.port))
        see_ends()
        if time.monotonic() >= next_trickle:
            next_trickle = time.monotonic() + 0.5
            for sock in trickling:
                if sock not in ended:
                    try:
                        sock.send(b"X")
                    except OSError:
                        pass
        time.sleep(0.02)
    held = [ended.get(sock, time.monotonic()) - at for sock, at in opened.items()]
    for sock in opened:
        sock.close()
    selector.close()
    return {"latencies": latencies, "max_held_s": max(held), "p50_held_s": p(held, 0.5), "p99_held_s": p(held, 0.99),
            "left_open": count - len(ended)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stalled", type=int, default=1000, help="stalled connections per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=2.0, help="the agent's idle and read-header timeouts (s)")
    parser.add_argument("--scrapes", type=int, default=100, help="baseline scrapes")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.stalled + 256
    if soft < want:   # this process holds the stalled connections' client ends
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    with tempfile.TemporaryDirectory(prefix="lockstep-bench-stalled-") as tmp:
        node = simulated_node(Path(tmp))
        if node is None:
            raise SystemExit("the simulator could not write a node")
        agent = Agent(node, Path(tmp) / "agent.log", args.timeout)
        try:
            for _ in range(20):
                scrape(agent.port)   # warm-up: the first scrapes discover the devices
            baseline = [scrape(agent.port) for _ in range(args.scrapes)]
            sockets_before, lines_before = agent.sockets(), agent.lines()
            rounds = []
            for _ in range(args.rounds):
                rounds.append(stalled_round(agent, args.stalled, args.timeout))
                time.sleep(0.2)   # the last closes reach the agent's socket table
                rounds[-1]["sockets_after"] = agent.sockets()
            logged = agent.text().splitlines()[lines_before:]
            peak_kb, soft_nofile = agent.status_kb("VmHWM"), agent.soft_nofile()
        finally:
            agent.stop()
    stalled = [t for r in rounds for t in r["latencies"]]
    print(f"node agent, default collectors on a simulated H100 node; {args.rounds} rounds of {args.stalled} stalled "
          f"connections (half silent, half a header trickled a byte every 0.5 s), timeouts {args.timeout:g} s; "
          f"soft open-files limit at start 1024, lifted by the agent to {soft_nofile}")
    print(f"  scrapes, baseline ({len(baseline)}): p50 {p(baseline, 0.5) * 1e3:.1f} ms, p99 {p(baseline, 0.99) * 1e3:.1f} ms")
    print(f"  scrapes, stalled connections open ({len(stalled)}): p50 {p(stalled, 0.5) * 1e3:.1f} ms, "
          f"p99 {p(stalled, 0.99) * 1e3:.1f} ms, max {max(stalled) * 1e3:.1f} ms")
    print(f"  ratio stalled/baseline: p50 {p(stalled, 0.5) / p(baseline, 0.5):.2f}, "
          f"p99 {p(stalled, 0.99) / p(baseline, 0.99):.2f}")
    for i, r in enumerate(rounds, 1):
        print(f"  round {i}: held p50 {r['p50_held_s']:.2f} s, p99 {r['p99_held_s']:.2f} s, longest {r['max_held_s']:.2f} s "
              f"(timeout {args.timeout:g} s), {r['left_open']} left open, agent sockets {sockets_before} before, "
              f"{r['sockets_after']} after")
    print(f"  agent log: {len(logged)} lines during the rounds; peak RSS {peak_kb / 1024:.1f} MiB")
    for line in logged[:LOG_LINES_BUDGET + 1]:
        print(f"    {line[:160]}")
    checks = [("p99 stalled (ms)", p(stalled, 0.99) * 1e3, P99_BUDGET_S * 1e3, "{:.1f}"),
              ("longest held (s)", max(r["max_held_s"] for r in rounds), args.timeout + 2.0, "{:.2f}"),
              ("left open", sum(r["left_open"] for r in rounds), 0, "{:.0f}"),
              ("sockets left over", max(r["sockets_after"] for r in rounds) - sockets_before, 0, "{:.0f}"),
              ("log lines", len(logged), LOG_LINES_BUDGET, "{:.0f}"),
              ("peak RSS (MiB)", peak_kb / 1024, MEMORY_LIMIT_KB / 1024, "{:.1f}")]
    return 0 if report_budgets(checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
