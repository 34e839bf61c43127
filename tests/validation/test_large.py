"""A validation result from a very long tool table, through the real commands: ``lockstep validate
ingest`` of a 262,144-row nccl-tests log (``-b 1K -e 256M -i 1K``, inside the 64 MiB input cap) in bounded
memory, stored summarised, and the node agent (``lockstep exporter --collector.validation``) serving it,
and skipping unread a result file as large as earlier versions wrote, within its memory limit."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lockstep.validation.parsers import parse_file
from lockstep.validation.result import from_parsed
from lockstep.validation.sizetable import MAX_ROWS
from lockstep.validation.store import MAX_SERIES_BYTES, Store, series_file
from tests.helpers.nccl_output import write_file
from tests.helpers.paths import FIXTURES
from tests.helpers.stalled import REPO, Process, get

pytestmark = pytest.mark.integration
ROWS = 262_144
AGENT_MEMORY_KB = 160 * 1024     # the chart's limit for the node agent (the systemd unit's MemoryMax is 200M)
INGEST_MEMORY_KB = 100 * 1024    # a command run next to the agent, in a Slurm prolog or a gate Job


def peak_rss_kb(argv: list[str], timeout: float = 300) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``argv`` to its end under a parent of its own: its exit, output, and its peak RSS (ru_maxrss
    of the parent's only child)."""
    code = ("import json, resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(json.dumps([r.returncode, r.stdout, r.stderr, "
            "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=timeout,
                         cwd=REPO)
    rc, stdout, stderr, peak = json.loads(out.stdout)
    return subprocess.CompletedProcess(argv, rc, stdout, stderr), peak


def lockstep(*args: str) -> list[str]:
    return [sys.executable, "-m", "lockstep", *args]


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def scrape(agent: Process) -> str:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{agent.port}/metrics", timeout=120) as response:
        return response.read().decode()


def test_a_262144_row_nccl_log_is_ingested_in_bounded_memory_stored_small_and_served(tmp_path):
    """Before: ingest took 2.4 KB per row (a peak past 700 MB here) and stored every row (92 MB of JSON),
    which the agent then read whole on its first scrape (past 400 MB against its 160 Mi limit)."""
    log = tmp_path / "all_reduce.log"
    peak_gbs, avg_gbs = write_file(log, ROWS)
    results = tmp_path / "results"
    done, peak = peak_rss_kb(lockstep("validate", "ingest", str(log), "--kind", "nccl", "--node", "node00",
                                      "--results-dir", str(results), "--json"))
    assert done.returncode == 0, done.stderr
    assert peak < INGEST_MEMORY_KB, f"ingest peaked at {peak // 1024} MiB"
    doc = json.loads(done.stdout)
    assert doc["figures"]["peak_busbw_bytes_per_second"] == pytest.approx(peak_gbs * 1e9)   # over every row
    assert doc["figures"]["avg_busbw_bytes_per_second"] == pytest.approx(avg_gbs * 1e9)
    detail = doc["detail"]
    assert detail["row_count"] == ROWS and len(detail["rows"]) <= MAX_ROWS
    sizes = [row["size_bytes"] for row in detail["rows"]]
    assert sizes == [1024 << k for k in range(19)]   # 1 KiB, 2 KiB, ... 256 MiB: a sweep by a factor of two
    stored = series_file(results, "node00", "nccl", "all_reduce_perf", 1)
    assert stored.stat().st_size < 64 * 1024

    agent = Process(["exporter", "--collector.disable-defaults", "--collector.validation",
                     f"--validation.results-dir={results}", "--node.name=node00"], tmp_path / "agent.log")
    try:
        served = samples(scrape(agent))
        assert agent.status("VmHWM") < AGENT_MEMORY_KB
    finally:
        agent.stop()
    key = ('lockstep_validation_bandwidth_bytes_per_second{kind="nccl",test="all_reduce_perf",scale="1",subject="",'
           'figure="peak_busbw"}')
    assert served[key] == pytest.approx(peak_gbs * 1e9)


def test_a_result_file_as_large_as_earlier_versions_wrote_is_skipped_unread(tmp_path):
    """Before: the agent read a 92 MB result whole on its first scrape and grew past its memory limit (an
    OOM restart loop on every node of a shared results directory). Now such a file is logged and
    skipped, and the node's other results are served."""
    store = Store(tmp_path)
    allreduce = parse_file("nccl", FIXTURES / "validation" / "nccl_allreduce.log")
    store.write(from_parsed(allreduce, "all_reduce_perf", ("node00",), 1767225600.0, 95.0, "f"))
    store.write(from_parsed(allreduce, "all_gather_perf", ("node00",), 1767225600.0, 95.0, "f"))
    old = series_file(tmp_path, "node00", "nccl", "all_gather_perf", 1)
    _grow_as_earlier_versions_stored(old, ROWS)
    assert old.stat().st_size > 20 * MAX_SERIES_BYTES

    agent = Process(["exporter", "--collector.disable-defaults", "--collector.validation",
                     f"--validation.results-dir={tmp_path}", "--node.name=node00"], tmp_path / "agent.log")
    try:
        assert get(agent.port, timeout=120)[0] == 200
        served = samples(scrape(agent))
        assert agent.status("VmHWM") < AGENT_MEMORY_KB
    finally:
        agent.stop()
    tests = {k.split('test="')[1].split('"')[0] for k in served if k.startswith("lockstep_validation_status")}
    assert tests == {"all_reduce_perf"}
    assert served['lockstep_scrape_collector_success{collector="validation"}'] == 1
    assert f"skipping validation result {old}" in agent.text() and "larger than" in agent.text()


def _grow_as_earlier_versions_stored(path, rows: int) -> None:
    """Rewrite the series file with every one of ``rows`` table rows in its detail, as ingest stored
    them before results were summarised (written a row at a time)."""
    doc = json.loads(path.read_bytes())
    doc["latest"]["detail"] = "@ROWS@"
    head, tail = json.dumps(doc, separators=(",", ":")).split('"@ROWS@"')
    placement = '{"time_seconds":0.000123,"algbw_bytes_per_second":12340000000.0,"busbw_bytes_per_second":' \
                '23450000000.0,"check":0.0}'
    with open(path, "w") as f:
        f.write(head + '{"rows":[')
        for i in range(1, rows + 1):
            f.write(("," if i > 1 else "") + f'{{"size_bytes":{1024 * i},"count":{256 * i},"type":"float",'
                    f'"redop":"sum","root":-1,"out_of_place":{placement},"in_place":{placement}}}')
        f.write('],"ranks":[]}' + tail)
