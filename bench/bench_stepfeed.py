"""What ``lockstep.training.step_end()`` adds to a training step, and that it never waits on the agent.

In one run, on this machine: the time per call of an empty Python function (the floor of any call a training loop
makes), then of ``step_end()`` with the agent in four states: reading its socket (a thread of this process
draining a bound socket), gone (no socket), never reading (a bound socket whose buffer fills), and too slow (a
reader that sleeps between reads). Each as the mean of the fastest of several repeats of many calls, at the
default report interval (one datagram a second) and with a report on every call (the send path itself, the worst
case). Calls run in a worker thread: one that blocked would stop it, and the run fails. The slowest single call of
a run with a report on every call is printed too.

Budget: under 5 µs per call at the default interval, whatever the agent's state; printed as a ratio to the empty
call and in µs. Exit status 1 when it is missed or a call blocked.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep import training  # noqa: E402

BUDGET_S = 5e-6
ENV = {"RANK": "3", "LOCAL_RANK": "3", "SLURM_JOB_ID": "4242", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


def empty(step=None) -> None:
    pass


def per_call(fn, number: int, repeat: int) -> float:
    """Seconds per call, the fastest repeat; run in a thread that must finish (a blocked call fails the bench)."""
    result: list[float] = []

    def run() -> None:
        times = timeit.repeat("fn(7)", globals={"fn": fn}, number=number, repeat=repeat)
        result.append(min(times) / number)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(120)
    if not result:
        raise SystemExit("a step_end() call blocked: the worker did not finish within 120 s")
    return result[0]


def slowest_call(number: int) -> float:
    worst = 0.0
    clock = time.perf_counter
    for i in range(number):
        started = clock()
        training.step_end(i)
        worst = max(worst, clock() - started)
    return worst


class Agent:
    """A socket standing in for the agent: ``reading`` drains it, ``slow`` sleeps between reads, else it fills."""

    def __init__(self, path: Path, mode: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = None
        if mode in ("reading", "slow"):
            self.thread = threading.Thread(target=self.read, args=(0.05 if mode == "slow" else 0.0,), daemon=True)
            self.thread.start()

    def read(self, pause: float) -> None:
        while not self.stop.is_set():
            try:
                self.sock.recv(4096)
            except socket.timeout:
                continue
            if pause:
                time.sleep(pause)

    def close(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join()
        self.sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="stepfeed", dir="/tmp"))
    rows, ok = [], True
    try:
        floor = per_call(empty, args.number, args.repeat)
        for mode in ("reading", "gone", "never reading", "slow"):
            path = work / f"{mode.replace(' ', '-')}.sock"
            agent = None if mode == "gone" else Agent(path, "reading" if mode == "reading" else
                                                      "slow" if mode == "slow" else "full")
            try:
                for interval, label in ((None, "default (1 s)"), (0.0, "every call")):
                    training.configure(env=ENV, socket_path=str(path), interval=interval)
                    number = args.number if interval is None else args.number // 10
                    seconds = per_call(training.step_end, number, args.repeat)
                    worst = slowest_call(20_000) if interval == 0.0 else None
                    rows.append((mode, label, seconds, worst, training.stats()))
            finally:
                if agent:
                    agent.close()
    finally:
        training.configure(env={"LOCKSTEP_STEPS": "0"})
        shutil.rmtree(work, ignore_errors=True)
    print(f"python {sys.version.split()[0]}; empty function call: {floor * 1e6:.3f} µs")
    print(f"{'agent':<14} {'reports':<14} {'µs/call':>8} {'x empty':>8} {'slowest call':>13}  sent / dropped")
    for mode, label, seconds, worst, stats in rows:
        slow = f"{worst * 1e6:10.1f} µs" if worst is not None else ""
        print(f"{mode:<14} {label:<14} {seconds * 1e6:8.3f} {seconds / floor:8.1f} {slow:>13}  "
              f"{stats['sent']} / {stats['dropped']}")
        if label.startswith("default") and seconds >= BUDGET_S:
            print(f"  over budget: {seconds * 1e6:.2f} µs >= {BUDGET_S * 1e6:.0f} µs")
            ok = False
    print(f"budget: step_end() at the default interval < {BUDGET_S * 1e6:.0f} µs per call, whatever the agent: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
