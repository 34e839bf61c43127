"""Planning a window's pieces (``lockstep.analytics.service.pieces``) and running them: pieces cover
exactly what is missing, each within the budget; a piece that times out is split, not asked for whole
again, and the job's pace learns it."""
from __future__ import annotations

import numpy as np
import pytest

from lockstep.analytics.frame.inputs import INPUTS
from lockstep.analytics.prom.errors import PrometheusError, QueryTimeout
from lockstep.analytics.service.pieces import MIN_SAMPLES, NAME_CHARS, RAW_SERIES, Pace, Piece, plan, run, shares

SM = next(i for i in INPUTS if i.name == "sm")


def _cells(pieces: list[Piece]) -> list[tuple[int, int]]:
    return [(r, n) for p in pieces for r in range(p.first, p.first + p.rows) for n in range(p.lo, p.hi)]


@pytest.mark.parametrize("budget", [1, 7, 64, 500, 10_000, 10**9])
def test_pieces_cover_exactly_the_missing_cells_each_within_the_budget(budget):
    rng = np.random.default_rng(3)
    series = rng.integers(1, 9, 40)
    missing = np.ones((60, 40), bool)
    missing[:20, 5:25] = False            # a block fetched before
    missing[50:, :] = False               # the newest rows fetched before
    missing[rng.random((60, 40)) < 0.05] = False
    pieces = plan(SM, missing, series, budget)
    cells = _cells(pieces)
    assert len(cells) == len(set(cells))                              # nothing twice
    assert set(cells) == set(zip(*np.nonzero(missing)))               # exactly what is missing
    for p in pieces:
        assert p.cost == p.rows * series[p.lo:p.hi].sum()
        assert p.cost <= budget or (p.rows == 1 and p.hi - p.lo == 1)  # one node's row cannot be split


def test_a_window_that_fits_is_one_piece_and_a_large_one_is_split_by_nodes_first():
    series = np.full(100, 8)
    assert [(p.first, p.rows, p.lo, p.hi) for p in plan(SM, np.ones((181, 100), bool), series, 10**6)] == \
        [(0, 181, 0, 100)]
    pieces = plan(SM, np.ones((181, 100), bool), series, 20_000)
    assert all(p.rows == 181 for p in pieces) and len(pieces) == 8    # node groups over the whole time
    assert max(p.cost for p in pieces) <= 20_000


def test_an_input_selected_by_job_id_is_split_by_time_only():
    pieces = plan(SM, np.ones((100, 1), bool), np.asarray([300]), 3_000, by_node=False)
    assert all((p.lo, p.hi, p.by_node) == (0, 1, False) for p in pieces)
    assert [p.first for p in pieces] == [90, 80, 70, 60, 50, 40, 30, 20, 10, 0]   # newest first
    assert pieces[0].halves(np.asarray([300]))[0].first == 95


async def test_a_timed_out_piece_is_split_until_it_fits_and_the_pace_learns_it():
    series = {SM.name: np.full(16, 8)}
    answered, asked = [], []

    async def answer(p: Piece) -> None:
        asked.append(p)
        if p.cost > 3_000:
            raise QueryTimeout("took too long")
        answered.append(p)

    pace = Pace(samples=10**6)
    assert await run(plan(SM, np.ones((100, 16), bool), series[SM.name], pace.samples), answer, pace, series)
    assert sorted(_cells(answered)) == [(r, n) for r in range(100) for n in range(16)]
    assert len(_cells(answered)) == 1600                               # no cell answered twice
    assert pace.samples <= 3_000 and pace.concurrency == 1 and pace.timeouts == len(asked) - len(answered)
    # learned: a new plan at the job's pace fits at once
    asked.clear()
    assert await run(plan(SM, np.ones((100, 16), bool), series[SM.name], pace.samples), answer, pace, series)
    assert all(p.cost <= 3_000 for p in asked)


async def test_an_unsplittable_timeout_and_any_other_error_are_raised_with_what_was_answered_kept():
    series = {SM.name: np.full(4, 8)}
    answered = []

    async def answer(p: Piece) -> None:
        if p.lo == 3:
            raise PrometheusError("HTTP 422: too many samples")
        answered.append(p)

    with pytest.raises(PrometheusError, match="422"):
        await run(plan(SM, np.ones((5, 4), bool), series[SM.name], 40), answer, Pace(concurrency=1), series)
    assert {p.lo for p in answered} == {0, 1, 2}

    async def slow(p: Piece) -> None:
        raise QueryTimeout("took too long")

    pace = Pace()
    with pytest.raises(QueryTimeout):
        await run([Piece(SM, 0, 1, 0, 1, 8)], slow, pace, series)
    assert pace.samples == MIN_SAMPLES


async def test_no_piece_starts_after_the_deadline_but_the_first():
    series = {SM.name: np.full(4, 8)}
    asked = []

    async def answer(p: Piece) -> None:
        asked.append(p)

    pieces = plan(SM, np.ones((5, 4), bool), series[SM.name], 40)
    assert not await run(pieces, answer, Pace(concurrency=1), series, deadline=0.0)
    assert asked == pieces[:1]


def test_a_piece_names_and_reads_at_most_what_one_query_may():
    """A steady refresh of 8,192 nodes answers few samples, but its node list alone is over the 16 KiB
    a VictoriaMetrics takes by default, and 128 PFC series per node are over the 300,000 series it
    reads: it goes in several queries."""
    names = [f"node{i:04d}" for i in range(8192)]
    for raw, limit in ((np.full(8192, 8), NAME_CHARS), (np.full(8192, 128), RAW_SERIES)):
        fixed = shares(names, raw)
        pieces = plan(SM, np.ones((7, 8192), bool), np.full(8192, 1), 10**9, fixed=fixed)
        assert len(pieces) > 1 and all(fixed[p.lo:p.hi].sum() <= 1.0 + fixed.max() for p in pieces)
        per_piece = [sum(len(n) + 1 for n in names[p.lo:p.hi]) if limit == NAME_CHARS else raw[p.lo:p.hi].sum()
                     for p in pieces]
        assert max(per_piece) <= limit and sorted(_cells(pieces)) == [(r, n) for r in range(7) for n in range(8192)]
