"""One run continues another's hardware counters (``lockstep.simulator.counters``, ``sim run --counters-from``):
a cluster's PDU energy, port bytes and storage traffic do not restart with a new job."""
from __future__ import annotations

import collections
import json
import subprocess
import sys

import numpy as np
import pytest

from lockstep.simulator import counters
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import load_scenario
from tests.helpers.paths import REPO

SCENARIO = REPO / "simulator/scenarios/xid.yaml"     # XID 48 then 79 on node03 GPU 6


def last_state(model: Model, ticks: int):
    (state,) = collections.deque(model.states(ticks), maxlen=1)
    return state


def test_a_run_starts_where_another_ended_and_goes_on_counting():
    scenario = load_scenario(SCENARIO)
    first = last_state(Model(scenario), 40)
    ended = counters.of(first)
    second = Model(scenario, start_timestamp=first.timestamp + 5, counters=json.loads(json.dumps(ended)))
    states = second.states(2)
    start = next(states)
    assert start.power["pdu_j"].tolist() == ended["power"]["pdu_j"]          # continues, no reset
    assert start.port["port_xmit_data"].tolist() == ended["port"]["port_xmit_data"]
    assert start.storage["lustre_write_bytes"].tolist() == ended["storage"]["lustre_write_bytes"]
    assert [tuple(e[:3]) for e in start.xid_events] == [tuple(e[:3]) for e in ended["xid_events"]]
    after = next(states)
    assert (after.power["pdu_j"] > np.asarray(ended["power"]["pdu_j"])).all()   # ...and goes on counting
    assert first.lost.any() and not after.lost.any()    # the GPU lost to XID 79 was replaced, not carried over


def test_a_document_for_another_cluster_is_refused_by_name():
    scenario = load_scenario(SCENARIO)
    doc = counters.of(next(Model(scenario).states(1)))
    doc["power"]["pdu_j"] = doc["power"]["pdu_j"][:-1]
    with pytest.raises(ValueError, match=r"power.pdu_j: shape \(1,\), this cluster has \(2,\)"):
        next(Model(scenario, counters=doc).states(1))
    with pytest.raises(ValueError, match=r"xid_events\[0\]: GPU 99 does not exist"):
        next(Model(scenario, counters={"xid_events": [[1, 99, 48, 0.0]]}).states(1))


@pytest.mark.integration
def test_sim_run_refuses_a_bad_counters_file_before_writing_anything(tmp_path):
    bad = tmp_path / "counters.json"
    bad.write_text(json.dumps({"counters": {"storage": {"lustre_write_bytes": [1, 2]}}}))
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "run", str(SCENARIO), "--root", str(tmp_path / "root"),
                           "--counters-from", str(bad), "--duration", "5"], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 2 and f"{bad}: counters: storage.lustre_write_bytes: shape (2,)" in proc.stderr
    assert not (tmp_path / "root").exists()
