"""``lockstep validate run`` / ``ingest`` / ``report`` as a script calls them: real processes, real files."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lockstep.cli import main
from lockstep.stack import require_binary
from lockstep.validation.parsers import MAX_BYTES
from lockstep.validation.runner import HEAD_BYTES, TAIL_BYTES, run_bounded
from lockstep.validation.store import read_series
from tests.helpers.paths import FIXTURES
from tests.helpers.process_bounds import Bounded, smallest_helm_memory_limit

pytestmark = pytest.mark.integration

V = FIXTURES / "validation"
# A stand-in for a tool that hangs (DCGM on a wedged GPU): it forks a child, records both pids and sleeps.
HANG = textwrap.dedent("""
    import os, signal, sys, time
    if sys.argv[2:] == ["ignore-term"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        time.sleep(3600)
        os._exit(0)
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getpid()} {child}")
    print("started", flush=True)
    time.sleep(3600)
""")


def lockstep(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockstep", "validate", *args], capture_output=True, text=True,
                          timeout=timeout)


def gone(pid: int) -> bool:
    """No such process, or only a zombie left for init to reap."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pids: list[int], deadline_s: float = 30) -> list[int]:
    end = time.monotonic() + deadline_s
    while (alive := [p for p in pids if not gone(p)]) and time.monotonic() < end:
        time.sleep(0.05)
    return alive


@pytest.fixture
def hang(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    return script, tmp_path / "pids"


def test_hanging_tool_times_out_and_leaves_no_process(tmp_path, hang):
    script, pidfile = hang
    out = lockstep("run", "dcgm-diag", "--timeout", "1", "--results-dir", str(tmp_path / "r"), "--node", "node07",
                   "--json", "--", sys.executable, str(script), str(pidfile))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["status"], doc["ok"], doc["test"], doc["nodes"]) == ("timeout", False, "diag", ["node07"])
    assert "killed after 1 s" in doc["message"]
    stored = read_series(tmp_path / "r" / "node07" / "dcgm-diag" / "diag@1.json")
    assert stored["latest"]["status"] == "timeout" and "started" in stored["latest"]
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2 and wait_gone(pids) == []


def test_a_tool_ignoring_sigterm_is_killed(hang):
    script, pidfile = hang
    outcome = run_bounded([sys.executable, str(script), str(pidfile), "ignore-term"], timeout=1, grace=0.5)
    assert outcome.timed_out and not outcome.stuck and outcome.returncode is None
    assert outcome.stdout == "started\n"
    assert wait_gone([int(p) for p in pidfile.read_text().split()]) == []


def test_what_a_finished_tool_left_behind_is_killed(tmp_path):
    pidfile = tmp_path / "bg"
    script = f"sleep 3600 & echo $! > {pidfile}; cat {V / 'gpu_burn.log'}"
    outcome = run_bounded(["sh", "-c", script], timeout=60)
    assert not outcome.timed_out and outcome.returncode == 0 and "Tested 8 GPUs" in outcome.stdout
    assert wait_gone([int(pidfile.read_text())]) == []


def test_run_parses_and_stores_the_tools_output(tmp_path):
    out = lockstep("run", "gpu-burn", "--timeout", "60", "--results-dir", str(tmp_path), "--node", "node03", "--json",
                   "--", "cat", str(V / "gpu_burn.log"))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "pass" and doc["figures"]["gpu7.flop_per_second"] == 16926e9
    assert (tmp_path / "node03" / "gpu-burn" / "gpu-burn@1.out").read_text().startswith("GPU 0: NVIDIA A100")


def test_run_of_the_real_fio_stores_its_figures(tmp_path):
    """fio is the one validation tool that runs here for real (the others need a GPU or an HCA): a
    random-read and a sequential-write job on a scratch file, each for a second, through ``validate
    run`` as a node's health check would call it."""
    fio = require_binary("fio")
    version = subprocess.run([fio, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    job = ["--filename", str(tmp_path / "scratch"), "--size", "8M", "--bs", "4k", "--runtime", "1", "--time_based",
           "--ioengine", "psync", "--lat_percentiles", "1"]
    out = lockstep("run", "fio", "--timeout", "60", "--results-dir", str(tmp_path / "results"), "--node", "n1",
                   "--json", "--", fio, "--output-format=json", "--name", "randread", "--rw", "randread", *job,
                   "--name", "write", "--rw", "write", *job)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "pass" and doc["tool_version"] == version.removeprefix("fio-")
    figures = doc["figures"]
    for job_name, direction in (("randread", "read"), ("write", "write")):
        prefix = f"{job_name}.{direction}"
        assert figures[f"{prefix}_bw_bytes_per_second"] > 0 and figures[f"{prefix}_iops_per_second"] > 0
        p50, p99, p99_9 = (figures[f"{prefix}_lat_{p}_seconds"] for p in ("p50", "p99", "p99_9"))
        assert 0 < p50 <= p99 <= p99_9 < 1.0, (job_name, p50, p99, p99_9)   # seconds, not nanoseconds
    assert not any(key.startswith("randread.write") or key.startswith("write.read") for key in figures)


def test_run_records_unparsable_output_and_a_failing_exit_as_error(tmp_path):
    out = lockstep("run", "nccl", "--timeout", "60", "--results-dir", str(tmp_path), "--node", "n1", "--json",
                   "--", "sh", "-c", "echo 'NCCL WARN Cuda failure out of memory' >&2; exit 3")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["status"] == "error" and doc["test"] == "nccl"
    assert "sh stdout:1: empty output" in doc["message"] and "exit status 3" in doc["message"]
    assert "Cuda failure" in doc["message"]
    out = lockstep("run", "gpu-burn", "--timeout", "60", "--results-dir", str(tmp_path), "--node", "n1", "--json",
                   "--", "sh", "-c", f"cat {V / 'gpu_burn.log'}; exit 1")
    assert out.returncode == 1 and json.loads(out.stdout)["status"] == "error"


def test_an_output_past_the_bound_keeps_its_head_and_tail_only():
    script = "import sys; w = sys.stdout.write; w('BANNER\\n'); w('x' * 2000000); w('\\nSUMMARY\\n'); " \
             "sys.stderr.write('e' * 2000000 + 'LAST ERROR')"
    outcome = run_bounded([sys.executable, "-c", script], timeout=60, max_bytes=1500000)
    out, err = outcome.captured_stdout, outcome.captured_stderr
    assert out.truncated and out.size == len("BANNER\n") + 2000000 + len("\nSUMMARY\n")
    assert out.text.startswith("BANNER\nxxx") and out.text.endswith("xxx\nSUMMARY\n")
    assert f"[... {out.size - HEAD_BYTES - TAIL_BYTES} bytes not kept ...]" in out.text
    assert len(out.text) < HEAD_BYTES + TAIL_BYTES + 100 and len(err.text) < HEAD_BYTES + TAIL_BYTES + 100
    assert err.truncated and err.size == 2000010 and err.text.endswith("eLAST ERROR")
    whole = run_bounded([sys.executable, "-c", "print('x' * 1000)"], timeout=60, max_bytes=1001)
    assert not whole.captured_stdout.truncated and whole.stdout == "x" * 1000 + "\n"


def test_run_of_a_tool_printing_past_64_mib_stays_within_its_memory_and_says_so(tmp_path):
    """Before: the whole output (80 MiB here) was read into memory, decoded and copied, past the
    smallest limit the chart gives a service. Now it is an error naming the size, stored with the
    output's head and tail."""
    size = MAX_BYTES + (16 << 20)
    tool = f"echo '# nccl-tests banner'; head -c {size} /dev/zero | tr '\\0' x; echo; echo '# Avg bus bandwidth: 1'"
    proc = Bounded.lockstep(["validate", "run", "nccl", "--test", "all_reduce_perf", "--timeout", "120", "--node",
                             "n1", "--results-dir", str(tmp_path / "r"), "--json", "--", "sh", "-c", tool],
                            smallest_helm_memory_limit(), tmp_path / "out.log")
    try:
        assert proc.exited(120) == 1
    finally:
        proc.stop()
    doc = json.loads(proc.log())
    assert doc["status"] == "error" and doc["ok"] is False
    total = len("# nccl-tests banner\n") + size + len("\n# Avg bus bandwidth: 1\n")
    assert f"sh stdout: {total} bytes, larger than 64 MiB: not one tool run's output, not parsed" in doc["message"]
    kept = (tmp_path / "r" / "n1" / "nccl" / "all_reduce_perf@1.out").read_text()
    assert kept.startswith("# nccl-tests banner\nxxx") and kept.endswith("xxx\n# Avg bus bandwidth: 1\n")


def test_ingest_prints_the_contract_json(tmp_path):
    out = lockstep("ingest", str(V / "ib_loopback_8M_size.log"), "--kind", "perftest", "--node", "node01",
                   "--results-dir", str(tmp_path), "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["kind"] == "perftest" and doc["ok"] is True
    assert doc["figures"]["bw_average_bytes_per_second"] == 24056.72 * (1 << 20)
    assert doc["stored"] == [str(tmp_path / "node01" / "perftest" / "ib_write_bw_ib0@1.json")]


@pytest.mark.parametrize("args,message", [
    (["--kind", "nccl", "--test", "all_reduce_perf"], "truncated"),
    (["--kind", "nccl"], "truncated"),
    (["--kind", "fio", "--test", "x"], "invalid JSON"),
])
def test_ingest_of_bad_output_names_file_and_line_and_stores_nothing(tmp_path, args, message):
    bad = tmp_path / "cut.log"
    text = (V / ("disk_performance.log" if "fio" in args else "nccl_allreduce.log")).read_text()
    bad.write_text(text[: len(text) // 2])
    out = lockstep("ingest", str(bad), *args, "--node", "n1", "--results-dir", str(tmp_path / "r"))
    assert out.returncode == 2 and f"{bad}:" in out.stderr and message in out.stderr and "nothing stored" in out.stderr
    assert not (tmp_path / "r").exists()


def test_ingest_of_old_nccl_output_needs_a_test_name(tmp_path):
    out = lockstep("ingest", str(V / "nccl_allreduce.log"), "--kind", "nccl", "--results-dir", str(tmp_path))
    assert out.returncode == 2 and "give --test" in out.stderr and not any(tmp_path.iterdir())


def test_ingest_takes_nodes_from_the_output_or_a_host_list(tmp_path):
    two = lockstep("ingest", str(V / "nccl_v2.18_two_nodes.constructed.log"), "--kind", "nccl", "--results-dir",
                   str(tmp_path), "--json")
    assert json.loads(two.stdout)["nodes"] == ["gpu-a01", "gpu-a02"] and json.loads(two.stdout)["scale"] == 2
    listed = lockstep("ingest", str(V / "nccl_per_iter.constructed.log"), "--kind", "nccl", "--node", "gpu-b[07-09]",
                      "--results-dir", str(tmp_path), "--json")
    assert json.loads(listed.stdout)["nodes"] == ["gpu-b07", "gpu-b08", "gpu-b09"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-a01", "gpu-a02", "gpu-b07", "gpu-b08", "gpu-b09"]


def test_report_shows_latest_beside_history_and_peers(tmp_path, capsys):
    day = 86400
    for i, busbw in enumerate((230, 231, 229, 232)):
        for node, factor in (("n1", 1.0), ("n2", 1.0), ("n3", 0.7 if i == 3 else 1.0)):
            text = (V / "nccl_no_hash.constructed.log").read_text().replace("218.31", f"{busbw * factor:g}")
            path = tmp_path / f"{node}-{i}.log"
            path.write_text(text)
            assert main(["validate", "ingest", str(path), "--kind", "nccl", "--node", node, "--results-dir",
                         str(tmp_path / "r"), "--started", str(1767225600 + i * day)]) == 0
    out = lockstep("report", "--all", "--results-dir", str(tmp_path / "r"))
    lines = {line.split()[0]: line for line in out.stdout.splitlines()[1:] if "avg_busbw" in line}
    assert out.returncode == 0 and set(lines) == {"n1", "n2", "n3"}
    # n3: 232 * 0.7 = 162.4 GB/s against a history of 230/231/229 (median 230) and peers 232 (n1, n2)
    assert "162.40 GB/s  230.00 GB/s  0.71  232.00 GB/s  0.70  LOW" in lines["n3"]
    # n1: peers are n2 (232) and n3 (162.4): median 197.2
    assert lines["n1"].rstrip().endswith("232.00 GB/s  230.00 GB/s  1.01  197.20 GB/s  1.18")
