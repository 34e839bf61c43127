"""Summed counters that never go backwards: a sequence of answers built from the recorded MinIO and Ceph RGW answers
(tests/fixtures/minio, tests/fixtures/ceph-rgw), two sources each, every counter of source A at 1, 2, 3, 4, 5 times
its recorded value and of source B at 2, 4, then restarted at 1, then absent, then back at 3 times. Work done,
counted by hand in recorded units: A 5 in all; B 4 before its restart, 1 after it, 2 while it was not seen; so the
exported sums are 3, 6, 8, 9 and 12 times the recorded values, where a plain sum gives 3, 6, 4, 4, 8."""
from __future__ import annotations

import pytest

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.catalog.model import COUNTER
from lockstep.exporters.storagesys import cephrgw, minio
from lockstep.exporters.storagesys.monotonic import FORGET_AFTER_POLLS, CounterSums
from tests.helpers.storagefake import CEPH_RGW, MINIO_BUCKET

STEPS = ((1, 2), (2, 4), (3, 1), (4, None), (5, 3))   # (factor of A, factor of B or None: B absent)
EXPORTED = (3, 6, 8, 9, 12)
PLAIN = (3, 6, 4, 4, 8)


def _answer(recorded: str, counted: tuple[str, ...], a: str, b: str, fa: int, fb: int | None) -> str:
    """The recorded answer with source ``a``'s counters times ``fa`` and source ``b``'s copy times ``fb``."""
    lines = []
    for line in recorded.splitlines():
        if not line.startswith(counted) or a not in line:
            lines.append(line)
            continue
        name, value = line.rsplit(" ", 1)
        lines.append(f"{name} {float(value) * fa!r}")
        if fb is not None:
            lines.append(f"{name.replace(a, b)} {float(value) * fb!r}")
    return "\n".join(lines) + "\n"


KINDS = {
    "minio": (minio, MINIO_BUCKET, ("minio_bucket_requests", "minio_bucket_traffic"),
              'server="127.0.0.1:9000"', 'server="127.0.0.2:9000"'),
    "ceph-rgw": (cephrgw, CEPH_RGW, ("ceph_rgw_op", "ceph_rgw_failed_req"), 'instance_id="hrgsea"',
                 'instance_id="other1"'),
}


def run(kind: str, plain: bool = False) -> list[dict]:
    module, recorded, counted, a, b = KINDS[kind]
    sums = CounterSums()
    out = []
    for fa, fb in STEPS:
        text = _answer(recorded, counted, a, b, fa, fb)
        found = module.read("t", text) if plain else sums.combine(module.read_sources("t", text))
        out.append({(s.metric.name, s.labels): s.value for s in found if s.metric.type == COUNTER})
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_restart_and_an_absence_never_make_a_summed_counter_go_backwards(kind):
    module, recorded = KINDS[kind][:2]
    base = {(s.metric.name, s.labels): s.value for s in module.read("t", recorded) if s.metric.type == COUNTER}
    assert base
    answers = run(kind)
    for key, value in base.items():
        assert [got[key] for got in answers] == pytest.approx([value * k for k in EXPORTED]), key
    plain = run(kind, plain=True)   # what the sum read alone gives: the drops rate() reads as resets
    key = next(k for k, v in base.items() if v > 0)
    assert [got[key] for got in plain] == pytest.approx([base[key] * k for k in PLAIN])


def test_hand_read_values():
    answers = run("minio")
    assert [a[(m.READ_BYTES.name, ("t", "bucket", "mybucket"))] for a in answers] == [3696, 7392, 9856, 11088, 14784]
    answers = run("ceph-rgw")   # put_obj_bytes 5327 per gateway in the recorded answer
    assert [a[(m.WRITE_BYTES.name, ("t", "cluster", "rgw"))] for a in answers] == [15981, 31962, 42616, 47943, 63924]


def test_gauges_pass_through_and_absent_series_are_not_exported():
    sums = CounterSums()
    first = sums.combine(minio.read_sources("t", MINIO_BUCKET))
    assert (m.USED.name, ("t", "bucket", "mybucket")) in {(s.metric.name, s.labels) for s in first}
    other = MINIO_BUCKET.replace('bucket="mybucket"', 'bucket="other"')
    second = sums.combine(minio.read_sources("t", other))
    assert {s.labels[2] for s in second} == {"other"}


def test_state_of_long_gone_series_is_forgotten():
    sums = CounterSums()
    gone = MINIO_BUCKET.replace('bucket="mybucket"', 'bucket="gone"')
    sums.combine(minio.read_sources("t", gone))
    for _ in range(2 * FORGET_AFTER_POLLS):   # checked every FORGET_AFTER_POLLS answers
        sums.combine(minio.read_sources("t", MINIO_BUCKET))
    assert not any(key[0][1][2] == "gone" for key in sums._last)
    assert any(key[0][1][2] == "mybucket" for key in sums._last)
