"""``lockstep.analytics.prom.decode`` on real captured ``query_range`` answers (tests/fixtures/analytics/answers, see
its README), on generated ones, and on broken ones. The reference is Python's own ``json`` and
``float``: every answer decodes to exactly the labels, grid rows and values they read."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.analytics.prom.decode import decode_matrix
from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.analytics.prom.grid import Window
from tests.helpers.paths import FIXTURES

ANSWERS = FIXTURES / "analytics/answers"
GRID = Window(1767225890.0, 1767225910.0, 5.0)


def reference(body: bytes, grid: Window) -> list[tuple[dict, int, float]]:
    """(labels, row, value) of every sample, read with json and float."""
    out = []
    for series in json.loads(body)["data"]["result"]:
        for t, v in series["values"]:
            out.append((series["metric"], round((t - grid.start) / grid.step), float(v)))
    return out


def decoded(body: bytes, grid: Window) -> list[tuple[dict, int, float]]:
    block = decode_matrix(body, grid)
    return [(block.labels[s], int(r), float(v)) for s, r, v in zip(block.series, block.rows, block.values)]


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(la == lb and ra == rb and (va == vb or (math.isnan(va) and math.isnan(vb)))
                                    for (la, ra, va), (lb, rb, vb) in zip(a, b))


@pytest.mark.parametrize("name", ["prometheus-sm", "prometheus-reasons", "prometheus-empty", "prometheus-inf-nan",
                                  "victoriametrics-sm"])
def test_captured_answers_decode_to_what_json_reads(name):
    body = (ANSWERS / f"{name}.json").read_bytes()
    assert same(decoded(body, GRID), reference(body, GRID))


@pytest.mark.parametrize("name", ["prometheus-sm", "prometheus-reasons", "prometheus-inf-nan", "victoriametrics-sm"])
def test_the_layout_both_stores_write_takes_the_fast_path(name):
    """Prometheus' and VictoriaMetrics' answers are split in C, never handed to ``json`` whole."""
    from lockstep.analytics.prom import decode

    labels, counts, _, _ = decode._fast((ANSWERS / f"{name}.json").read_bytes())
    assert len(labels) == len(counts) > 0


def test_what_the_captures_hold():
    sm = decode_matrix((ANSWERS / "prometheus-sm.json").read_bytes(), GRID)
    throttled = [s for s, labels in enumerate(sm.labels) if labels == {"gpu": "3", "node": "node01"}]
    last = sm.values[(sm.series == throttled[0]) & (sm.rows == 3)]
    assert last.tolist() == [0.72] and len(sm.labels) == 8 and sm.samples == 32
    odd = decode_matrix((ANSWERS / "prometheus-inf-nan.json").read_bytes(), GRID)
    by_gpu = {odd.labels[s]["gpu"]: v for s, v in zip(odd.series, odd.values)}
    assert by_gpu["0"] == math.inf and math.isnan(by_gpu["nan-0"])
    vm = decode_matrix((ANSWERS / "victoriametrics-sm.json").read_bytes(), GRID)
    assert {"gpu": 'e"x}', "node": "node01"} in vm.labels
    assert decode_matrix((ANSWERS / "prometheus-empty.json").read_bytes(), GRID).samples == 0


@pytest.mark.parametrize("name", ["prometheus-error", "prometheus-too-many"])
def test_an_error_answer_is_malformed_as_a_matrix(name):
    """source_prom reports these by their HTTP status first; a proxy that answers 200 with them is caught here."""
    with pytest.raises(MalformedAnswer, match="not a successful answer"):
        decode_matrix((ANSWERS / f"{name}.json").read_bytes(), GRID)


def _broken() -> dict[str, bytes]:
    good = (ANSWERS / "prometheus-sm.json").read_bytes()
    return {"truncated": good[:len(good) // 2], "not a number": good.replace(b'"0.675"', b'"fast"', 1),
            "off the grid": good.replace(b"1767225895,", b"1767225896,", 1),
            "three in a pair": good.replace(b'"0.675"]', b'"0.675",1]', 1),
            "a comma in a value": good.replace(b'"0.675"', b'"0,675"', 1),
            "labels not strings": good.replace(b'"gpu":"0"', b'"gpu":0', 1),
            "a vector": good.replace(b'"matrix"', b'"vector"'), "not an object": b"[1, 2]",
            "values missing": good.replace(b'"values"', b'"histograms"', 1), "empty": b"",
            "nested past the stack": b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"}


@pytest.mark.parametrize("case", sorted(_broken()))
def test_a_broken_answer_is_one_clear_error(case):
    with pytest.raises(MalformedAnswer):
        decode_matrix(_broken()[case], GRID)


_LABEL = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**60, 2**60).map(float))


@st.composite
def matrices(draw) -> tuple[bytes, Window]:
    """An answer in Prometheus' layout (Go's json: compact, "NaN"/"+Inf"/"-Inf", shortest float text)."""
    step = draw(st.sampled_from([1.0, 5.0, 0.5, 15.0]))
    grid = Window(1767225600.0, 1767225600.0 + 9 * step, step)
    result = []
    for _ in range(draw(st.integers(0, 5))):
        rows = sorted(draw(st.sets(st.integers(0, 9), min_size=1)))
        labels = draw(st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), _LABEL, max_size=3))
        result.append({"metric": labels, "values": [[grid.start + r * step, _text(draw(_VALUE))] for r in rows]})
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=draw(st.booleans())).encode(), grid


def _text(v: float) -> str:
    return "NaN" if math.isnan(v) else "+Inf" if v == math.inf else "-Inf" if v == -math.inf else repr(v)


@settings(max_examples=200, deadline=None)
@given(matrices())
def test_generated_answers_decode_to_what_json_reads(answer):
    body, grid = answer
    assert same(decoded(body, grid), reference(body, grid))


def test_a_large_answer_keeps_every_sample():
    """Thousands of series, as a big job answers: the samples of each stay with their series."""
    rng = np.random.default_rng(3)
    result = [{"metric": {"node": f"node{i // 8:04d}", "gpu": str(i % 8)},
               "values": [[GRID.start + r * 5, repr(float(v))] for r, v in enumerate(rng.random(5))]}
              for i in range(4096)]
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                      separators=(",", ":")).encode()
    assert same(decoded(body, GRID), reference(body, GRID))
