"""``lockstep.analytics.prom.promql``: job ids a scheduler gives are accepted, crafted ones rejected, strings quoted."""
from __future__ import annotations

import pytest

from lockstep.analytics.prom import promql


@pytest.mark.parametrize("bad", ['4242"}', "a b", "", "x" * 129, "-1", "4242\n", 'a\\"', "{job}"])
def test_crafted_job_ids_are_rejected(bad):
    with pytest.raises(promql.InvalidJobId):
        promql.job_selector(bad)


@pytest.mark.parametrize("good", ["4242", "4242_7", "4242+0", "train.llama-70b:v2"])
def test_scheduler_job_ids_are_accepted(good):
    assert promql.job_selector(good) == f'lockstep_gpu_job_info{{job="lockstep-node",job_id="{good}"}}'


def test_quote_escapes_everything_that_could_end_the_string():
    assert promql.quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
