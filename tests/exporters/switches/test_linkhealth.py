"""Link-health verdicts against the thresholds' own arithmetic (exporters/switches/thresholds.py)."""
from __future__ import annotations

from lockstep.exporters.switches.linkhealth import History, judge
from lockstep.exporters.switches.thresholds import Thresholds

A, B = ("0xa", 1), ("0xb", 7)
HDR_4X = 200e9   # bits per second
BASE = {"SymbolErrorCounter": 0, "LinkDownedCounter": 0, "LinkErrorRecoveryCounter": 0,
        "ExcessiveBufferOverrunErrors": 0, "LocalLinkIntegrityErrors": 0}


def feed(history, key, steps, every_s=60.0, **rise):
    """``steps`` sweeps ``every_s`` apart; each named counter rises by its value per sweep."""
    for i in range(steps + 1):
        history.observe(i * every_s, [(key, {**BASE, **{k: v * i for k, v in rise.items()}})])


def test_symbol_errors_within_the_ber_budget_are_ok_and_past_it_degraded():
    # 12 min at 200 Gb/s and 1e-12: a budget of 144 errors. 11 per minute is 132, 13 per minute is 156.
    under, over = History(), History()
    feed(under, A, 12, SymbolErrorCounter=11)
    feed(over, A, 12, SymbolErrorCounter=13)
    assert judge(under, A, HDR_4X, None, None).state == "ok"
    assert judge(over, A, HDR_4X, None, None).reasons == ("symbol_ber_12m",)


def test_the_long_window_keeps_a_burst_in_view_after_the_short_one_forgets_it():
    history = History()
    history.observe(0, [(A, BASE)])
    history.observe(60, [(A, {**BASE, "SymbolErrorCounter": 2000})])   # a burst over both budgets (144, 1500)
    for minute in range(2, 40):
        history.observe(minute * 60, [(A, {**BASE, "SymbolErrorCounter": 2000})])
    assert judge(history, A, HDR_4X, None, None).reasons == ("symbol_ber_125m",)


def test_link_downed_on_either_end_fails_both_and_heals_after_the_window():
    history = History(Thresholds(fatal_window_s=600))
    history.observe(0, [(A, BASE), (B, BASE)])
    history.observe(60, [(A, BASE), (B, {**BASE, "LinkDownedCounter": 1})])
    assert judge(history, B, HDR_4X, None, A).reasons == ("link_downed",)
    assert judge(history, A, HDR_4X, None, B).reasons == ("partner_link_downed",)
    for minute in range(2, 13):
        history.observe(minute * 60, [(A, BASE), (B, {**BASE, "LinkDownedCounter": 1})])
    assert judge(history, A, HDR_4X, None, B).state == "ok"


def test_fatal_counters_recoveries_and_a_narrow_link():
    for counter, reason in (("ExcessiveBufferOverrunErrors", "excessive_buffer_overrun"),
                            ("LocalLinkIntegrityErrors", "local_link_integrity")):
        history = History()
        feed(history, A, 2, **{counter: 1})
        assert judge(history, A, HDR_4X, None, None).reasons == (reason,)
    recovering = History()
    feed(recovering, A, 3, LinkErrorRecoveryCounter=6)
    assert judge(recovering, A, HDR_4X, None, None).reasons == ("link_error_recovery",)
    steady = History()
    feed(steady, A, 3)
    assert judge(steady, A, 100e9, 200e9, None).reasons == ("rate_below_expected",)
    assert judge(steady, A, 200e9, 200e9, None).state == "ok"


def test_a_counter_reset_starts_the_port_again():
    history = History()
    history.observe(0, [(A, {**BASE, "LinkDownedCounter": 5})])
    history.observe(60, [(A, BASE)])
    assert judge(history, A, HDR_4X, None, None).state == "ok"


def test_a_counter_missing_from_one_sweep_is_not_a_reset_that_forgets_a_link_down():
    history = History(Thresholds(fatal_window_s=600))
    errors = {**BASE, "SymbolErrorCounter": 5}
    history.observe(0, [(A, errors)])
    history.observe(60, [(A, {**errors, "LinkDownedCounter": 1})])
    partial = {k: v for k, v in errors.items() if k != "SymbolErrorCounter"}   # that line did not read this sweep
    history.observe(120, [(A, {**partial, "LinkDownedCounter": 1})])
    assert judge(history, A, HDR_4X, None, None).reasons == ("link_downed",)
    history.observe(180, [(A, BASE)])   # every counter back to zero: a real reset on the switch, history restarts
    assert judge(history, A, HDR_4X, None, None).state == "ok"
