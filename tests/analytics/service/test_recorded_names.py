"""Which inputs a service reads from their recorded series: those the store's analytics group says it records (the
``inputs`` label of its step series), at the service's step, on every group answered (``recorded_names``)."""
from __future__ import annotations

import pytest

from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.analytics.service.source import recorded_names
from lockstep.exporters.catalog.recorded import ANALYTICS_INPUTS, ANALYTICS_STEP, ANALYTICS_STEP_LABEL, FIRST_RECORDED


def group(step: float, inputs: str | None = None) -> dict:
    labels = {} if inputs is None else {ANALYTICS_STEP_LABEL: inputs}
    return {"metric": labels, "value": [1_700_000_000.0, f"{step:g}"]}


def test_the_inputs_a_group_names_are_read_recorded():
    assert recorded_names([group(5.0, ",".join(ANALYTICS_INPUTS))], 5.0) == set(ANALYTICS_INPUTS)
    assert recorded_names([group(5.0, "clock,tx")], 5.0) == {"clock", "tx"}


def test_a_group_written_before_the_label_recorded_the_first_inputs_only():
    """A store's rules from before the label: the Inspector input it did not record is read raw."""
    assert recorded_names([group(5.0)], 5.0) == set(FIRST_RECORDED)
    assert "collective" in ANALYTICS_INPUTS and "collective" not in FIRST_RECORDED


def test_names_this_version_does_not_read_are_ignored():
    assert recorded_names([group(5.0, "clock,a_later_input")], 5.0) == {"clock"}


def test_two_groups_in_one_store_give_what_both_record():
    assert recorded_names([group(5.0, "clock,tx,collective"), group(5.0)], 5.0) == {"clock", "tx"}


def test_no_group_or_another_step_reads_nothing_recorded():
    assert recorded_names([], 5.0) == set()
    assert recorded_names([group(15.0, ",".join(ANALYTICS_INPUTS))], 5.0) == set()
    assert recorded_names([group(5.0, "clock"), group(15.0, "clock")], 5.0) == set()


@pytest.mark.parametrize("answer", [[{"metric": {}}], [{"value": [0, "x"], "metric": {}}], ["no"],
                                    [{"metric": {ANALYTICS_STEP_LABEL: 3}, "value": [0, "5"]}]])
def test_a_malformed_answer_is_an_error_naming_the_series(answer):
    with pytest.raises(MalformedAnswer, match=ANALYTICS_STEP):
        recorded_names(answer, 5.0)
