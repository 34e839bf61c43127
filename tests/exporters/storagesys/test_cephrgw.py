"""Ceph RGW's op counters, as ceph-exporter serves them, decoded into the common storage-system metrics, on
the answer constructed from Ceph's documentation and exporter source (tests/fixtures/ceph-rgw/README.md);
the expected values are read off that answer (and the documentation's counter dump) by hand."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import cephrgw
from lockstep.exporters.storagesys.errors import AnswerError
from tests.helpers.storagefake import CEPH_RGW

C = ("ceph", "cluster", "rgw")
B = ("ceph", "bucket", "bucket1")


def as_dict(samples):
    return {(s.metric.name, s.labels): s.value for s in samples}


def test_the_answer_decodes_to_gateway_and_bucket_metrics():
    got = as_dict(cephrgw.read("ceph", CEPH_RGW))
    expected = {}
    for key in (C, B):
        expected.update({
            (m.READ_BYTES.name, key): 5325.0,                     # get_obj_bytes
            (m.WRITE_BYTES.name, key): 5327.0,                    # put_obj_bytes
            (m.OPERATIONS.name, (*key, "put_obj")): 2.0,
            (m.OPERATIONS.name, (*key, "get_obj")): 5.0,
            (m.OPERATIONS.name, (*key, "list_buckets")): 1.0,
            (m.LATENCY.name, (*key, "put_obj")): 2.818065,        # put_obj_lat sum, six decimals as printed
            (m.LATENCY.name, (*key, "get_obj")): 0.003,
            (m.LATENCY.name, (*key, "list_buckets")): 0.0023,
        })
    expected[(m.ERRORS.name, (*C, "failed"))] = 7.0               # ceph_rgw_failed_req
    assert got == expected


def test_gateways_on_one_host_are_summed_and_tenant_buckets_kept_apart():
    second = "\n".join(line.replace('instance_id="hrgsea"', 'instance_id="pqrstu"')
                       for line in CEPH_RGW.splitlines() if line.startswith("ceph_rgw_op_put_obj_bytes"))
    tenant = "\n".join(line.replace('bucket="bucket1",', 'bucket="bucket1",tenant="t1",')
                       for line in CEPH_RGW.splitlines() if line.startswith("ceph_rgw_op_per_bucket_get_obj_ops"))
    got = as_dict(cephrgw.read("ceph", CEPH_RGW + second + "\n" + tenant + "\n"))
    assert got[(m.WRITE_BYTES.name, C)] == 10654.0
    assert got[(m.OPERATIONS.name, (*B, "get_obj"))] == 5.0
    assert got[(m.OPERATIONS.name, ("ceph", "bucket", "t1/bucket1", "get_obj"))] == 5.0


def test_counts_and_other_daemons_series_are_not_read_and_absent_fields_stay_absent():
    other = ("# HELP ceph_osd_numpg Placement groups\n# TYPE ceph_osd_numpg gauge\nceph_osd_numpg{ceph_daemon=\"osd.0\"} 9\n"
             "ceph_exporter_scrape_time{function=\"dump_asok_metrics\",host=\"h\"} 12.000000\n")
    got = as_dict(cephrgw.read("ceph", other + CEPH_RGW))
    assert got == as_dict(cephrgw.read("ceph", CEPH_RGW))
    assert (m.ERRORS.name, (*B, "failed")) not in got
    assert (m.OPERATIONS.name, (*C, "del_obj")) not in got  # elided in the documentation: absent, not zero


@pytest.mark.parametrize("answer", [
    "<html><body>502 Bad Gateway</body></html>\n",
    "# HELP ceph_osd_numpg x\n# TYPE ceph_osd_numpg gauge\nceph_osd_numpg{ceph_daemon=\"osd.0\"} 9\n",  # a host without RGW
    "",
    CEPH_RGW[: CEPH_RGW.index("ceph_rgw_op_put_obj_ops{") + 30],  # cut mid-line
    'ceph_rgw_op_put_obj_ops{instance_id="hrgsea"} two\n',
])
def test_an_answer_that_is_not_rgw_counters_is_an_error(answer):
    with pytest.raises(AnswerError):
        cephrgw.read("ceph", answer)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_decodes_or_raises_answer_error(text):
    try:
        samples = cephrgw.read("ceph", text)
    except AnswerError:
        return
    assert all(s.metric in m.METRICS for s in samples)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='ceph_rgwop{}="bucket1,' + " \n0.5e", max_size=200))
def test_near_miss_text_decodes_or_raises_answer_error(text):
    try:
        cephrgw.read("ceph", "ceph_rgw_" + text)
    except AnswerError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(CEPH_RGW)))
def test_every_prefix_of_the_answer_decodes_or_raises_answer_error(n):
    try:
        cephrgw.read("ceph", CEPH_RGW[:n])
    except AnswerError:
        pass
