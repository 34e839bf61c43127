"""``make fuzz``: each target of fuzz/targets.py under atheris (coverage-guided, libFuzzer) for a
bounded time, seeded with the real captured fixtures. A crash is written to
tests/fuzz_regressions/<target>/ and the run goes on with the next target; the exit status says
whether any target crashed.

    python fuzz/run.py [--seconds 60] [TARGET ...]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEEDS = {
    "diskstats": ["procfs/diskstats"], "llite": ["procfs/fs/lustre", "lustre/lctl-2.14"],
    "mountstats": ["procfs/self"], "ethtool": ["ethtool/node"], "infiniband": ["sysfs/class/infiniband"],
    "redfish": ["redfish/public-rackmount1/Chassis", "redfish/public-pdu", "redfish/public-cooling-unit"],
    "webhook": ["alerts"], "yaml": ["alerts"],
    "nccl": [f"validation/{name}" for name in ("nccl_allreduce.log", "nccl_alltoall.log", "nccl_broadcast.log",
                                                "nccl_v2.18_two_nodes.constructed.log", "nccl_per_iter.constructed.log",
                                                "nccl_mpirun_tagged.constructed.log", "nccl_no_hash.constructed.log")],
    "perftest": ["validation/ib_loopback_8M_size.log", "validation/ib_loopback_all_sizes.log",
                 "validation/ib_write_lat.constructed.log"],
    "gpu-burn": ["validation/gpu_burn.log"],
}
MISSING = """error: atheris is not installed in this environment.
atheris (https://pypi.org/project/atheris/) ships wheels for CPython 3.8-3.11 on x86-64 Linux; on another
Python or platform it builds from source and needs clang with libFuzzer (Debian: clang, libclang-rt-dev).
Install it with: {python} -m pip install '.[fuzz]'"""


def seed_corpus(target: str, into: Path) -> None:
    for relative in SEEDS[target]:
        root = REPO / "tests/fixtures" / relative
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for i, path in enumerate(files[:200]):
            (into / f"seed-{i}").write_bytes(path.read_bytes()[:65536])


def run_target(target: str, seconds: int) -> bool:
    """True if the target ran its time without a crash."""
    crashes = REPO / "tests/fuzz_regressions" / target
    crashes.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as corpus:
        seed_corpus(target, Path(corpus))
        argv = [sys.executable, "-m", "fuzz.worker", target, corpus, f"-max_total_time={seconds}",
                f"-artifact_prefix={crashes}/", "-max_len=65536", "-rss_limit_mb=2048"]
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    tail = proc.stderr.strip().splitlines()[-3:]
    print(f"{target}: {'ok' if proc.returncode == 0 else 'CRASH (kept in ' + str(crashes) + ')'}; "
          + " | ".join(tail))
    return proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=60, help="time per target")
    parser.add_argument("targets", nargs="*", help="targets to run (default: all)")
    args = parser.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print(MISSING.format(python=sys.executable), file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    from fuzz.targets import TARGETS
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; known: {sorted(TARGETS)}")
    results = [run_target(t, args.seconds) for t in args.targets or TARGETS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
