"""``JobWindow.place`` lays the common answer (one series per GPU, every series on the same consecutive rows) as
rows of columns, a membership asked for by node alike, and a node-wide answer on consecutive rows and columns
through views; any answer lands exactly as the general placing puts it, the cells of a GPU that does not hold
the job untouched. A throttling reasons' answer lands each held reason on a matrix of its own."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.analytics.frame import window as W
from lockstep.analytics.frame.features import job_columns
from lockstep.analytics.frame.inputs import INPUTS, MEMBER
from lockstep.analytics.prom.decode import Block
from lockstep.analytics.prom.grid import Window

GRID = Window(1_767_225_600.0, 1_767_225_600.0 + 7 * 5.0, 5.0)
GPUS = [(f"node{n}", str(g)) for n in range(3) for g in range(4)]
BY_NAME = {i.name: i for i in INPUTS}


def _spans(draw, count: int, lo: int, n: int) -> tuple[list[int], list[int]]:
    """Rows and series of ``count`` series on rows ``lo`` .. ``lo + n - 1``, now and then one missing a row (not
    dense)."""
    rows, series = [], []
    for s in range(count):
        mine = list(range(lo, lo + n))
        if draw(st.integers(0, 9)) == 0 and n > 1:
            mine.pop(draw(st.integers(0, n - 1)))
        rows += mine
        series += [s] * len(mine)
    return rows, series


@st.composite
def answers(draw):
    """A window's GPUs and who holds the job where, and one answer: series of GPUs in and out of the window, on
    the same consecutive rows or (now and then) not."""
    held = draw(st.lists(st.sampled_from(GPUS), min_size=1, max_size=len(GPUS), unique=True))
    member = draw(st.lists(st.booleans(), min_size=8 * len(held), max_size=8 * len(held)))
    asked = draw(st.lists(st.sampled_from(GPUS + [("node9", "0")]), min_size=1, max_size=8))
    lo = draw(st.integers(0, 6))
    n = draw(st.integers(1, 8 - lo))
    value = st.one_of(st.floats(-1e6, 1e6, width=32), st.just(float("nan")))
    rows, series = _spans(draw, len(asked), lo, n)
    values = [draw(value) for _ in rows]
    block = Block([{"node": node, "gpu": gpu} for node, gpu in asked], np.asarray(series, np.int64),
                  np.asarray(rows, np.int64), np.asarray(values))
    return held, np.asarray(member).reshape(8, len(held)), block, draw(st.sampled_from(["sm", "clock", "temp"]))


def _window(held, member=None, pods=()) -> W.JobWindow:
    """The window of ``held``: who holds the job where (``member``; None: nobody yet), and the pod an earlier
    membership answer named for each GPU with its row (``pods``)."""
    window = W.JobWindow.empty(GRID, job_columns([("7", node, gpu) for node, gpu in held]))
    if member is not None:
        window.signals[W.MEMBER_SIGNAL][:] = np.where(member, 1.0, np.nan)
        window.signals["temp"][:] = 40.0   # earlier values: kept where the GPU did not hold the job
    for c, (pod, row) in enumerate(pods):
        window.held["pod"][0][c], window.held["pod"][1][c] = pod, row
    return window


@settings(max_examples=300, deadline=None)
@given(answers())
def test_placed_as_the_general_placing_places_it(answer):
    held, member, block, name = answer
    dense, general = _window(held, member), _window(held, member)
    dense.place(BY_NAME[name], block, 0)
    general._placed_dense = lambda *args: False
    general.place(BY_NAME[name], block, 0)
    np.testing.assert_array_equal(dense.signals[name], general.signals[name])


def test_the_common_answer_takes_the_rows_of_columns_way():
    held = GPUS[:4]
    window = _window(held, np.ones((8, 4), bool))
    block = Block([{"node": n, "gpu": g} for n, g in held], np.repeat(np.arange(4), 3), np.tile(np.arange(2, 5), 4),
                  np.arange(12.0))
    assert window._placed_dense(BY_NAME["sm"], block, 0, window._columns_of(BY_NAME["sm"].by, block.labels))
    assert window.signals["sm"][2:5, 1].tolist() == [3.0, 4.0, 5.0]
    assert not window._placed_dense(MEMBER, block, 0, window._columns_of(MEMBER.by, block.labels))


@st.composite
def memberships(draw):
    """A window whose GPUs some earlier answer already named pods for (up to some row), and one membership answer:
    series of GPUs in and out of the window, each with a pod (now and then two pods of one GPU), on the same
    consecutive rows or (now and then) not."""
    held = draw(st.lists(st.sampled_from(GPUS), min_size=1, max_size=len(GPUS), unique=True))
    before = draw(st.lists(st.tuples(st.sampled_from(["", "old"]), st.integers(-1, 7)), min_size=len(held),
                           max_size=len(held)))
    asked = draw(st.lists(st.tuples(st.sampled_from(GPUS + [("node9", "0")]), st.sampled_from(["p1", "p2", ""])),
                          min_size=1, max_size=8, unique=True))
    lo = draw(st.integers(0, 6))
    n = draw(st.integers(1, 8 - lo))
    rows, series = _spans(draw, len(asked), lo, n)
    block = Block([{"node": node, "gpu": gpu, "pod": pod} for (node, gpu), pod in asked], np.asarray(series, np.int64),
                  np.asarray(rows, np.int64), np.ones(len(rows)))
    return held, before, block, draw(st.integers(0, 7 - (lo + n - 1)))


@settings(max_examples=300, deadline=None)
@given(memberships())
def test_a_membership_is_placed_as_the_general_placing_places_it(answer):
    held, before, block, first = answer
    dense, general = _window(held, pods=before), _window(held, pods=before)
    dense.place(MEMBER, block, first)
    general._members_dense = lambda *args: False
    general.place(MEMBER, block, first)
    np.testing.assert_array_equal(dense.signals[W.MEMBER_SIGNAL], general.signals[W.MEMBER_SIGNAL])
    np.testing.assert_array_equal(dense.seen, general.seen)
    for values, dense_values in zip(general.held["pod"], dense.held["pod"]):
        assert values.tolist() == dense_values.tolist()


def test_a_membership_asked_for_by_node_takes_the_rows_of_columns_way():
    held = GPUS[:4]
    window = _window(held, pods=[("", -1)] * 4)
    block = Block([{"node": n, "gpu": g, "pod": f"p{g}"} for n, g in held], np.repeat(np.arange(4), 3),
                  np.tile(np.arange(2, 5), 4), np.ones(12))
    assert window._members_dense(MEMBER, block, 0, window._columns_of(MEMBER.by, block.labels))
    assert window.held["pod"][0].tolist() == ["p0", "p1", "p2", "p3"] and window.held["pod"][1].tolist() == [4] * 4
    shared = Block(block.labels + [{"node": "node0", "gpu": "0", "pod": "p9"}], np.repeat(np.arange(5), 3),
                   np.tile(np.arange(2, 5), 5), np.ones(15))
    assert not window._members_dense(MEMBER, shared, 0, window._columns_of(MEMBER.by, shared.labels))


@st.composite
def reasons(draw):
    """A window's GPUs and who holds the job where, and a throttling reasons' answer: series of GPUs in and out of
    the window, each with its reason (or none), on rows of their own, held (1) or not (0)."""
    held = draw(st.lists(st.sampled_from(GPUS), min_size=1, max_size=len(GPUS), unique=True))
    member = draw(st.lists(st.booleans(), min_size=8 * len(held), max_size=8 * len(held)))
    asked = draw(st.lists(st.tuples(st.sampled_from(GPUS + [("node9", "0")]),
                                    st.sampled_from(["hw_slowdown", "sw_power_cap", "sw_thermal_slowdown", None])),
                          min_size=1, max_size=8, unique=True))
    rows, series, values = [], [], []
    for s, _ in enumerate(asked):
        mine = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True))
        rows += mine
        series += [s] * len(mine)
        values += [draw(st.sampled_from([0.0, 1.0, 1.0])) for _ in mine]
    labels = [{"node": node, "gpu": gpu, **({"reason": reason} if reason else {})} for (node, gpu), reason in asked]
    block = Block(labels, np.asarray(series, np.int64), np.asarray(rows, np.int64), np.asarray(values))
    return held, np.asarray(member).reshape(8, len(held)), block


@settings(max_examples=300, deadline=None)
@given(reasons())
def test_each_held_reason_lands_on_its_own_matrix_where_the_gpu_held_the_job(answer):
    held, member, block = answer
    window = _window(held, member)
    window.place(BY_NAME["reasons"], block, 0)
    want: dict[str, np.ndarray] = {}
    column = {(node, gpu): c for c, (_, node, gpu) in enumerate(window.columns)}
    for s, row, value in zip(block.series, block.rows, block.values):
        labels = block.labels[s]
        c = column.get((labels["node"], labels["gpu"]))
        if value > 0 and c is not None and member[row, c]:
            cells = want.setdefault(W.REASON_PREFIX + labels.get("reason", ""), np.full(member.shape, np.nan))
            cells[row, c] = 1.0
    made = [name for name in window.signals if name.startswith(W.REASON_PREFIX)]
    assert sorted(made) == sorted(want)          # a matrix for each reason held, no other
    for name, cells in want.items():
        np.testing.assert_array_equal(window.signals[name], cells)
    throttle = np.where(np.isfinite(list(want.values())).any(axis=0), 1.0, np.nan) if want else np.full(member.shape, np.nan)
    np.testing.assert_array_equal(window.signals["throttle"], throttle)


@st.composite
def node_answers(draw):
    """A window's GPUs and who holds the job where, and a node-wide rate's answer: a series per node asked (some
    outside the window), on rows consecutive or not."""
    held, member, _, _ = draw(answers())
    asked = draw(st.lists(st.sampled_from([f"node{n}" for n in range(3)] + ["node9"]), min_size=1, max_size=4,
                          unique=True))
    rows, series, values = [], [], []
    for s, _ in enumerate(asked):
        mine = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8, unique=True))
        rows += sorted(mine)
        series += [s] * len(mine)
        values += [draw(st.floats(0, 1e9, width=32)) for _ in mine]
    block = Block([{"node": node} for node in asked], np.asarray(series, np.int64), np.asarray(rows, np.int64),
                  np.asarray(values))
    return held, member, block


@settings(max_examples=300, deadline=None)
@given(node_answers())
def test_a_node_wide_answer_is_placed_through_views_as_through_cell_lists(answer):
    held, member, block = answer
    views, lists = _window(held, member), _window(held, member)
    views.place(BY_NAME["read"], block, 0)
    span_of = W._span_of
    try:
        W._span_of = lambda index: None
        lists.place(BY_NAME["read"], block, 0)
    finally:
        W._span_of = span_of
    np.testing.assert_array_equal(views.signals["read"], lists.signals["read"])
