"""Property-based tests (hypothesis) of the node-side storage parsers added beside Lustre, NFS and disks: on
any input each raises nothing but its own error type, and where a format has items (devices, mounts, GPUs,
file systems) a corrupt item loses that item alone. The real captured files are cut, spliced and salted with
noise (tests/helpers/corrupt.py)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockstep.exporters.storage.cgroupio import CgroupFormatError, parse_io_stat, parse_pressure
from lockstep.exporters.storage.mountinfo import parse_mountinfo
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
