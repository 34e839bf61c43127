"""The storage exporter's own exposition reader against prometheus_client's parser (an independent reader)
on the recorded answers, and on the text format's corners (escapes, timestamps, special values)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.storagesys.promtext import parse_samples
from tests.helpers.storagefake import CEPH_RGW, MINIO_BUCKET


def wire_name(name, text):
    """prometheus_client names a counter's sample ``_total`` even where the text does not (ceph-exporter's
    counters have no such suffix): the name as written in the text."""
    bare = name.removesuffix("_total")
    return bare if name != bare and f"\n{name}" not in "\n" + text else name


def reference(text, prefix):
    return sorted((wire_name(s.name, text), tuple(sorted(s.labels.items())), s.value)
                  for f in text_string_to_metric_families(text)
                  for s in f.samples if s.name.startswith(prefix) and math.isfinite(s.value))


@pytest.mark.parametrize(("text", "prefix"), [(MINIO_BUCKET, "minio_"), (CEPH_RGW, "ceph_rgw_")])
def test_the_recorded_answers_read_as_prometheus_client_reads_them(text, prefix):
    got = sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in parse_samples(text, prefix))
    assert got == reference(text, prefix) and len(got) > 10


def test_the_named_series_alone_read_as_prometheus_client_reads_them():
    """``names``: MinIO's mapped series out of its recorded answer, as the independent reader gives those series."""
    from lockstep.exporters.storagesys.minio import READ

    got = sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in parse_samples(MINIO_BUCKET, "minio_", READ))
    assert got == [row for row in reference(MINIO_BUCKET, "minio_") if row[0] in READ] and len(got) > 5


def test_the_prefix_alone_makes_an_answer_of_its_system_the_named_series_are_read():
    """An answer of the system (a sample of ``prefix``) holding none of the named series reads as nothing, not as an
    error; one holding no sample of ``prefix`` stays an error; a named line that is no sample is an error, the lines of
    other series are not read."""
    assert parse_samples("minio_usage_last_activity_nano_seconds 1\n", "minio_", ("minio_bucket_",)) == []
    with pytest.raises(AnswerError):
        parse_samples("# HELP minio_x y\ngo_goroutines 12\nminio_x{bad\n", "minio_", ("minio_bucket_",))
    with pytest.raises(AnswerError):
        parse_samples('minio_bucket_usage_total_bytes{bucket="a"} 1\nminio_bucket_usage_total_bytes{bucket=\n',
                      "minio_", ("minio_bucket_",))
    got = parse_samples('minio_other{bucket=\nminio_bucket_usage_total_bytes{bucket="a"} 7\n', "minio_",
                        ("minio_bucket_",))
    assert [(s.name, s.labels, s.value) for s in got] == [("minio_bucket_usage_total_bytes", {"bucket": "a"}, 7.0)]


def test_escapes_timestamps_and_special_values():
    text = ('x_a{p="a\\"b\\\\c\\nd",q="}"} 1.5 1700000000000\n'
            'x_b 2\r\n'
            'x_c{} NaN\nx_d +Inf\nx_e{l="v",} -3e2\n')
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in parse_samples(text, "x_")}
    assert got == {("x_a", (("p", 'a"b\\c\nd'), ("q", "}"))): 1.5, ("x_b", ()): 2.0, ("x_e", (("l", "v"),)): -300.0}


@pytest.mark.parametrize("line", ['x_a{p="unclosed} 1', "x_a 1_000", 'x_a{p=v} 1', "x_a", "x_a 1 2 3", 'x_a{="v"} 1'])
def test_a_broken_sample_line_is_an_answer_error(line):
    with pytest.raises(AnswerError):
        parse_samples(line + "\n", "x_")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='x_a{}="\\,. \t\n+-1eNaInf', max_size=120))
def test_near_miss_text_reads_or_raises_answer_error(text):
    try:
        parse_samples("x_" + text, "x_")
    except AnswerError:
        pass


def test_a_label_set_read_again_is_the_same_and_each_sample_owns_its_labels():
    """Label texts are read once and kept: the second poll of the same answer reads the same samples, a caller
    changing one sample's labels changes no other, and a broken label text is refused every time it comes."""
    text = 'x_a{b="1",c="q\\"uote"} 1\nx_a{b="1",c="q\\"uote"} 2\n'
    first, again = parse_samples(text, "x_"), parse_samples(text, "x_")
    assert [s.labels for s in first] == [s.labels for s in again] == [{"b": "1", "c": 'q"uote'}] * 2
    first[0].labels["b"] = "changed"
    assert first[1].labels["b"] == "1" and parse_samples(text, "x_")[0].labels["b"] == "1"
    for _ in range(2):
        with pytest.raises(AnswerError):
            parse_samples('x_a{b="1",c=2} 1\n', "x_")
