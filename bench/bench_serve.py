"""``lockstep analytics serve`` as shipped (its default flags), against a real Prometheus and a real
VictoriaMetrics holding one training job of N GPUs (docs/deploy.md, the sizing table).

Per size, the job (N/8 nodes, GPU node05/3 throttled to 0.7 from 3 minutes before the service starts)
is written as TSDB blocks by ``lockstep sim backfill`` (the analytics' series at 5 s), with and without
the analytics inputs recorded by the store (serve_data.py). The command runs in its own process, its
clock set back to the data's time (they lie in the past; nothing else of it changes), 15 minutes into
the run, with only ``--prometheus-url`` and a loopback ``--web.listen-address``. Polling its API:
- first result: the first answer of /api/v1/jobs/<job> (with its window's coverage);
- whole window: coverage 1; flagged: the throttled GPU first reported as a straggler;
- steady: ``lockstep_analytics_refresh_duration_seconds`` of the refreshes after the window is whole;
- the store's CPU (its /proc stat) over the first fetch and per steady refresh, the command's peak RSS
  (VmHWM) over the first fetch and over the steady refreshes.
Then the post-mortem of a 4,096-GPU hour (``lockstep analytics evaluate --prometheus-url``, default flags) on each
store, with and without the recorded inputs as ``--rules`` asks.
The machine's load average is printed beside every figure.

Stores are kept under $LOCKSTEP_BENCH_CACHE (default: the temp dir) between runs.
Usage: bench/bench_serve.py [GPUS ...] [--backends prometheus,victoriametrics] [--rules without,with]
                            [--postmortem GPUS|0] [--prepare-only]      (default 4096 16384 65536)
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CACHE = Path(os.environ.get("LOCKSTEP_BENCH_CACHE", tempfile.gettempdir())) / "lockstep-bench-serve"
JOB, THROTTLED, WINDOW_S, THROTTLE_S = "9000", ("node05", "3"), 900.0, 720.0
RUN_S = {1024: 240, 4096: 360, 16384: 480, 65536: 660}   # how long a run may take (the data reach past it)
STEADY = 4                                     # steady refreshes measured
TARGETS = {16384: (120.0, 15.0, 3072.0), 65536: (300.0, 30.0, None)}   # first result s, steady s, MB
POSTMORTEM_S = 15.0
# Sets the clock of the command it starts back by argv[1] seconds, then runs `lockstep argv[2:]`.
SHIM = ("import sys, time; shift = float(sys.argv[1]); real = time.time; time.time = lambda: real() + shift; "
        "from lockstep.cli import main; sys.exit(main(sys.argv[2:]))")


def scenario(gpus: int, minutes: int, throttle_s: float = THROTTLE_S) -> dict:
    nodes = gpus // 8
    return {"name": f"bench-serve-{gpus}", "seed": 17, "duration_s": minutes * 60, "sample_period_s": 5.0,
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "nodes_per_rack": 16, "rack_budget_watts": 600000},
            "job": {"job_id": JOB, "nodes": nodes, "step_time_s": 1.5},
            "faults": [{"kind": "gpu_throttle", "node": THROTTLED[0], "gpu": int(THROTTLED[1]), "start_s": throttle_s,
                        "end_s": minutes * 60, "clock_factor": 0.7, "reason": "thermal"}]}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_mb(pid: int, reset: bool = False) -> float:
    peak = int(re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1)) / 1024
    if reset:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    return peak


def get(url: str, timeout: float = 30.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


def store(backend: str, rules: bool, workdir: Path, stack):
    from serve_data import PROM_CONFIG

    from lockstep.stack import start_prometheus, start_victoria_metrics

    if backend == "prometheus":
        return stack.add(start_prometheus(PROM_CONFIG, workdir / "prom-rules" if rules else workdir))
    return stack.add(start_victoria_metrics(workdir / ("vm-rules" if rules else "vm-raw"),
                                            extra_args=["-search.disableCache"]))


def serve(url: str, at: float, log: Path) -> tuple[subprocess.Popen, str]:
    from lockstep.stack import free_port

    port = free_port()
    argv = [sys.executable, "-c", SHIM, repr(at - time.time()), "analytics", "serve", "--prometheus-url", url,
            "--web.listen-address", f"127.0.0.1:{port}"]
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT), f"http://127.0.0.1:{port}"


def measure(api: str, proc: subprocess.Popen, tsdb_pid: int, budget_s: float) -> dict:
    """Poll the running service until its window is whole and ``STEADY`` refreshes after it, or ``budget_s``."""
    t0, cpu0, out = time.monotonic(), cpu_s(tsdb_pid), {"steady": [], "progress": []}
    updated, deadline = None, t0 + budget_s
    while time.monotonic() < deadline and proc.poll() is None and len(out["steady"]) < STEADY:
        time.sleep(0.5)
        status, body = get(f"{api}/api/v1/jobs")         # the summary: light at any size
        now = time.monotonic() - t0
        doc = json.loads(body) if status == 200 else {"data": []}
        data = next((row for row in doc["data"] if row["job_id"] == JOB), None)
        if data is None:
            status, body = get(f"{api}/api/v1/jobs/{JOB}")   # not scored yet: 404 with its coverage
            if status == 404 and b'"coverage"' in body:
                out["progress"].append((round(now, 1), json.loads(body)["coverage"]))
            continue
        changed, updated = doc["updated"] != updated, doc["updated"]
        out.setdefault("first_s", now)
        out.setdefault("first_coverage", data["coverage"])
        if any((g["node"], g["gpu"]) == THROTTLED for g in data["stragglers"]):
            out.setdefault("flagged_s", now)
        if data["coverage"] < 1.0 or not changed:
            continue
        if "whole_s" not in out:
            out.update(whole_s=now, whole_tsdb_cpu_s=cpu_s(tsdb_pid) - cpu0, whole_peak_mb=peak_mb(proc.pid, reset=True))
            last_cpu = cpu_s(tsdb_pid)
            continue
        metrics = get(f"{api}/metrics")[1].decode()
        value = {m.group(1): float(m.group(2)) for m in re.finditer(
            r"^lockstep_analytics_refresh_(duration_seconds|full_fetches|samples) (\S+)$", metrics, re.M)}
        if value.get("full_fetches", 1) == 0:
            out["steady"].append({"s": value["duration_seconds"], "samples": value["samples"],
                                  "tsdb_cpu_s": cpu_s(tsdb_pid) - last_cpu})
        last_cpu = cpu_s(tsdb_pid)
    if proc.poll() is None:
        out["steady_peak_mb"] = peak_mb(proc.pid)
    return out


def timeouts(log: Path) -> int:
    """The request timeouts the command split pieces for, as its log says when the window is whole."""
    found = re.findall(r'msg="window (?:whole|fetched in part)".* timeouts=(\d+)', log.read_text())
    return int(found[-1]) if found else 0


def run(gpus: int, backend: str, rules: bool, minutes: int) -> dict:
    from serve_data import prepare

    from lockstep.stack import Stack

    workdir = CACHE / f"{gpus}x{minutes}m"
    start = prepare(scenario(gpus, minutes), workdir, stores_for(backend, rules))
    load = [os.getloadavg()[0]]
    with Stack() as stack:
        tsdb = store(backend, rules, workdir, stack)
        log = workdir / f"serve-{backend}-{'rules' if rules else 'raw'}.log"
        proc, api = serve(tsdb.url, start + WINDOW_S, log)
        try:
            out = measure(api, proc, tsdb.proc.pid, RUN_S[gpus])
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    load.append(os.getloadavg()[0])
    return {"gpus": gpus, "backend": backend, "rules": rules, "load": load, "timeouts": timeouts(log), **out}


def stores_for(backend: str, rules: bool) -> set[str]:
    """The stores a run on ``backend`` needs prepared (the raw blocks always are)."""
    return {("prom" if backend == "prometheus" else "vm") + "-rules"} if rules else \
        ({"vm-raw"} if backend == "victoriametrics" else set())


def post_mortem(gpus: int, backend: str, rules: bool) -> dict:
    from serve_data import prepare

    from lockstep.stack import Stack

    workdir = CACHE / f"{gpus}x62m-postmortem"
    start = prepare(scenario(gpus, 62, throttle_s=600.0), workdir, stores_for(backend, rules))
    load = [os.getloadavg()[0]]
    with Stack() as stack:
        tsdb = store(backend, rules, workdir, stack)
        out, err = (workdir / f"post-mortem-{backend}-{'rules' if rules else 'raw'}.{k}" for k in ("json", "log"))
        cpu0, t0 = cpu_s(tsdb.proc.pid), time.perf_counter()
        # The hour from a minute into the data: recorded inputs are read for a window that starts after they did.
        proc = subprocess.Popen([sys.executable, "-m", "lockstep", "analytics", "evaluate", "--prometheus-url", tsdb.url,
                                 "--from", str(start + 60), "--to", str(start + 3660), "--json"],
                                stdout=out.open("wb"), stderr=err.open("wb"))
        _, status, usage = os.wait4(proc.pid, 0)        # its own peak RSS
        wall, tsdb_cpu = time.perf_counter() - t0, cpu_s(tsdb.proc.pid) - cpu0
    assert os.waitstatus_to_exitcode(status) == 0, err.read_text()[-2000:]
    report = json.loads(out.read_text())
    load.append(os.getloadavg()[0])
    return {"gpus": gpus, "backend": backend, "rules": rules, "wall_s": wall, "tsdb_cpu_s": tsdb_cpu, "load": load,
            "peak_mb": usage.ru_maxrss / 1024, "stragglers": [[d["node"], d["gpu"]] for d in report["stragglers"]]}


def report(rows: list[dict], pms: list[dict]) -> bool:
    print(f"lockstep analytics serve (default flags), one job, 15 min window at 5 s, every 30 s; {os.cpu_count()} CPUs "
          "shared with other work; load = 1-min load average before/after the run")
    print(f"{'GPUs':>6} {'store':<16} {'rules':<5} | {'first s':>7} {'cover':>5} {'whole s':>7} {'flag s':>6} "
          f"{'TSDB CPU':>8} {'RSS MB':>6} | {'steady s':>8} {'max s':>6} {'TSDB CPU':>8} {'RSS MB':>6} | {'load':>9}")
    ok = True
    for r in rows:
        steady = sorted(s["s"] for s in r["steady"])
        med = steady[len(steady) // 2] if steady else float("nan")
        cpu = sorted(s["tsdb_cpu_s"] for s in r["steady"])
        print(f"{r['gpus']:>6} {r['backend']:<16} {'yes' if r['rules'] else 'no':<5} | {r.get('first_s', float('nan')):>7.0f} "
              f"{r.get('first_coverage', float('nan')):>5.2f} {r.get('whole_s', float('nan')):>7.0f} "
              f"{r.get('flagged_s', float('nan')):>6.0f} {r.get('whole_tsdb_cpu_s', float('nan')):>8.0f} "
              f"{r.get('whole_peak_mb', float('nan')):>6.0f} | {med:>8.1f} {max(steady, default=float('nan')):>6.1f} "
              f"{cpu[len(cpu) // 2] if cpu else float('nan'):>8.1f} {r.get('steady_peak_mb', float('nan')):>6.0f} | "
              f"{r['load'][0]:>4.1f}/{r['load'][1]:<4.1f}")
        ok &= _held(r, med)
    for p in pms:
        print(f"post-mortem of {p['gpus']:,} GPUs x 1 h on {p['backend']} ({'with' if p['rules'] else 'without'} the "
              f"recording rules): {p['wall_s']:.1f} s, {p['peak_mb']:.0f} MB, "
              f"the store's CPU "
              f"{p['tsdb_cpu_s']:.1f} s, stragglers {p['stragglers']} (load {p['load'][0]:.1f}/{p['load'][1]:.1f})")
        good = p["wall_s"] <= POSTMORTEM_S and [tuple(s) for s in p["stragglers"]] == [THROTTLED]
        print(f"target: post-mortem {p['wall_s']:.1f} s (<= {POSTMORTEM_S:g}): {'held' if good else 'NOT held'}")
        ok &= good
    return ok


def _held(r: dict, steady: float) -> bool:
    flagged, measured = "flagged_s" in r, len(r["steady"]) == STEADY
    print(f"  {r['gpus']:,} GPUs on {r['backend']}: throttled GPU flagged: {'yes' if flagged else 'NO'}; "
          f"{len(r['steady'])} steady refreshes measured of {STEADY}; timeouts while fetching: {r.get('timeouts', 0)}; "
          f"progress before the first result: {r['progress'][-3:]}")
    if r["gpus"] not in TARGETS:
        return flagged and measured
    first, most, mb = TARGETS[r["gpus"]]
    peak = max(r.get("whole_peak_mb", 0.0), r.get("steady_peak_mb", 0.0))
    good = r.get("first_s", 1e9) <= first and steady <= most and (mb is None or peak <= mb)
    print(f"  target: first result <= {first:g} s, steady <= {most:g} s" + (f", <= {mb:g} MB" if mb else "") +
          f": {'held' if good and flagged and measured else 'NOT held'}")
    return good and flagged and measured


def main(argv: list[str]) -> int:
    opts = {"--backends": "prometheus,victoriametrics", "--rules": "without,with", "--postmortem": "4096"}
    for flag in list(opts):
        if flag in argv:
            at = argv.index(flag)
            opts[flag] = argv[at + 1]
            argv = argv[:at] + argv[at + 2:]
    prepare_only = "--prepare-only" in argv
    sizes = [int(a) for a in argv if a != "--prepare-only"] or [4096, 16384, 65536]
    backends, rules = opts["--backends"].split(","), [r == "with" for r in opts["--rules"].split(",")]
    if prepare_only:
        return _prepare(sizes, backends, rules, int(opts["--postmortem"]))
    rows = [run(g, b, r, minutes(g)) for g in sizes for r in rules for b in backends]
    pms = [post_mortem(int(opts["--postmortem"]), b, r) for r in rules for b in backends] if int(opts["--postmortem"]) else []
    return 0 if report(rows, pms) else 1


def minutes(gpus: int) -> int:
    return int((WINDOW_S + RUN_S[gpus]) // 60) + 2


def _prepare(sizes: list[int], backends: list[str], rules: list[bool], pm: int) -> int:
    from serve_data import cost, prepare

    for g in sizes:
        kinds = {f"{'prom' if b == 'prometheus' else 'vm'}-{'rules' if r else 'raw'}" for b in backends for r in rules}
        workdir = CACHE / f"{g}x{minutes(g)}m"
        prepare(scenario(g, minutes(g)), workdir, kinds - {"prom-raw"})
        print(g, json.loads((workdir / "done.json").read_text())["backfill"], cost(workdir), flush=True)
    if pm:
        workdir = CACHE / f"{pm}x62m-postmortem"
        prepare(scenario(pm, 62, throttle_s=600.0), workdir, set().union(*(stores_for(b, r) for b in backends for r in rules)))
        print("post-mortem", pm, json.loads((workdir / "done.json").read_text())["backfill"], cost(workdir), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
