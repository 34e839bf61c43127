"""Property-based tests (hypothesis) of the node-side storage parsers added beside Lustre, NFS and disks: on
any input each raises nothing but its own error type, and where a format has items (devices, mounts, GPUs,
file systems) a corrupt item loses that item alone. The real captured files are cut, spliced and salted with
noise (tests/helpers/corrupt.py)."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.exporters.storage.cgroupio import CgroupFormatError, parse_io_stat, parse_pressure
from lockstep.exporters.storage.mmdiag import REASON_CLASSES, parse_waiters, reason_class
from lockstep.exporters.storage.mmpmon import parse_fs_io_s
from lockstep.exporters.storage.mountinfo import parse_mountinfo
from lockstep.exporters.storage.nvfs import NvfsFormatError, parse_nvfs_stats
from lockstep.exporters.storage.nvmesmart import NvmeFormatError, parse_smart_log
from tests.helpers.corrupt import NOISE, spliced
from tests.helpers.paths import FIXTURES

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CGROUP = FIXTURES / "cgroup"
JOB = CGROUP / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242"


@FAST
@given(st.one_of(spliced(JOB / "io.stat"), NOISE))
def test_io_stat_never_raises(text):
    parse_io_stat(text, [])


@FAST
@given(st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 2 ** 20)), min_size=2, max_size=6, unique=True),
       st.integers(0, 2 ** 64 - 1), st.data())
def test_a_corrupt_io_stat_line_loses_that_device_alone(devices, n, data):
    names = [f"{major}:{minor}" for major, minor in devices]
    victim = data.draw(st.sampled_from(names))
    bad = data.draw(st.sampled_from(["²", "\u0663", "9" * 21, "x", "-1", ""]))
    text = "".join(f"{d} rbytes={bad if d == victim else n} wbytes={n} rios={n} wios={n}\n" for d in names)
    errors: list[str] = []
    assert [d.device for d in parse_io_stat(text, errors)] == [d for d in names if d != victim]
    assert len(errors) == 1 and errors[0].startswith(victim)


@FAST
@given(st.one_of(spliced(JOB / "io.pressure"), NOISE))
def test_pressure_raises_only_its_own_error(text):
    try:
        p = parse_pressure(text)
    except CgroupFormatError:
        return
    assert p.some_seconds >= 0 and (p.full_seconds is None or p.full_seconds >= 0)


@FAST
@given(st.one_of(spliced(CGROUP / "proc/self/mountinfo"), NOISE))
def test_mountinfo_never_raises(text):
    parse_mountinfo(text)
    parse_mountinfo(text, "/host/root")


NVFS = sorted((FIXTURES / "nvidia-fs").glob("*.txt"))


@FAST
@given(st.one_of(*(spliced(path) for path in NVFS), NOISE))
def test_nvfs_stats_raise_only_their_own_error(text):
    try:
        stats = parse_nvfs_stats(text, [])
    except NvfsFormatError:
        return
    assert all(v >= 0 for line in stats.lines.values() for v in line.values())


@FAST
@given(st.integers(0, 7), st.sampled_from(["²", "\u0663", "9" * 21, "x", "-1", ""]))
def test_a_corrupt_gpu_line_loses_that_gpu_alone(victim, bad):
    header = "NVFS statistics(ver: 4.0)\n"
    gpus = [f"GPU 0000:{0x18 + i:02x}:00.0  uuid:2f6c1c1e-0b3a-4c55-9d7e-00000000000{i} : "
            f"Registered_MiB={bad if i == victim else 1} Cache_MiB=0 max_pinned_MiB=2 \n" for i in range(8)]
    errors: list[str] = []
    stats = parse_nvfs_stats(header + "".join(gpus), errors)
    assert [g.pci_bus_id for g in stats.gpus] == [f"0000:{0x18 + i:02x}:00.0" for i in range(8) if i != victim]
    assert len(errors) == 1


NVME = sorted((FIXTURES / "nvme").glob("*.json"))
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2, 2 ** 130) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=8)


@FAST
@given(st.one_of(*(spliced(path) for path in NVME), NOISE, st.data()))
def test_smart_log_raises_only_its_own_error(case):
    if not isinstance(case, str):   # a real log with one field swapped for any JSON value
        doc = json.loads(NVME[case.draw(st.integers(0, len(NVME) - 1))].read_text())
        target = doc.get("nvme_smart_health_information_log", doc)
        target[case.draw(st.sampled_from(sorted(target)))] = case.draw(JSON_VALUES)
        case = json.dumps(doc)
    try:
        h = parse_smart_log(case)
    except NvmeFormatError:
        return
    assert h.media_errors >= 0 and h.percentage_used_ratio >= 0


@FAST
@given(st.one_of(*(spliced(path) for path in sorted((FIXTURES / "spectrum-scale").glob("*.txt"))), NOISE))
def test_fs_io_s_never_raises(text):
    errors: list[str] = []
    for fs in parse_fs_io_s(text, errors):
        assert fs.read_bytes >= 0 and fs.fsname


@FAST
@given(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True), min_size=2, max_size=6, unique=True), st.data())
def test_a_corrupt_fs_io_s_line_loses_that_file_system_alone(names, data):
    victim = data.draw(st.sampled_from(names))
    bad = data.draw(st.sampled_from(["\u00b2", "\u0663", "9" * 21, "x", "-1"]))
    line = ("_fs_io_s_ _n_ 10.0.0.1 _nn_ n1 _rc_ 0 _t_ 1 _tu_ 2 _cl_ c _fs_ {fs} _d_ 4 _br_ {br} _bw_ 5 _oc_ 6 _cc_ 7 "
            "_rdc_ 8 _wc_ 9 _dir_ 10 _iu_ 11\n")
    text = "".join(line.format(fs=name, br=bad if name == victim else 3) for name in names)
    assert [fs.fsname for fs in parse_fs_io_s(text)] == [n for n in names if n != victim]


WAITERS = FIXTURES / "spectrum-scale" / "mmdiag-waiters-gpfs_exporter.txt"


@FAST
@given(st.one_of(spliced(WAITERS), NOISE))
def test_waiters_never_raise(text):
    for waiter in parse_waiters(text, []):
        assert waiter.seconds >= 0 and reason_class(waiter.reason) in REASON_CLASSES


@FAST
@given(st.data())
def test_a_corrupt_waiter_record_loses_that_waiter_alone(data):
    lines = WAITERS.read_text().splitlines()[:28]   # the header and the node's 27 records
    victim = data.draw(st.integers(1, 27))
    fields = lines[victim].split(":")
    fields[10] = data.draw(st.sampled_from(["", "x", "-1", "nan", "inf", "1e400", "\u0663"]))   # waitTime
    lines[victim] = ":".join(fields)
    errors: list[str] = []
    waiters = parse_waiters("\n".join(lines), errors)
    assert len(waiters) == 26 and errors and errors[0].startswith(f"line {victim + 1}:")
