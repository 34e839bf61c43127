"""One sweep and what /metrics serves from it, on the real recorded outputs of treydock's fabric
(tests/fixtures/infiniband-diags/), with the tools answered in process (no subprocess)."""
from __future__ import annotations

from lockstep.exporters.catalog import switches as m
from lockstep.exporters.switches.app import sweep_once
from lockstep.exporters.switches.config import FabricConfig
from lockstep.exporters.switches.state import FabricState
from lockstep.exporters.switches.sweep import DiscoveryFailed, sweep
from lockstep.exporters.switches.tools import ToolResult
from lockstep.simulator import ibfabric, ibtools
from tests.helpers.paths import FIXTURES

TREY = FIXTURES / "infiniband-diags/treydock"
LOCAL = FIXTURES / "infiniband-diags/local"
SWITCH, HCA = "0x7cfe9003009ce5b0", "0x7cfe9003003b4bde"


def runner(hang=(), no_ib=False, calls=None):
    def run(argv, timeout_s):
        if calls is not None:
            calls.append((argv, timeout_s))
        tool = argv[0]
        if no_ib:
            return ToolResult(argv, 255, (LOCAL / f"{tool}-no-ib.stdout").read_text(),
                              (LOCAL / f"{tool}-no-ib.stderr").read_text(), 0.01)
        if tool == "ibnetdiscover":
            return ToolResult(argv, 0, (TREY / "ibnetdiscover/test.out").read_text(), "", 0.01)
        guid = argv[argv.index("-G") + 1]
        if guid in hang:
            return ToolResult(argv, None, "", "", timeout_s, timed_out=True)
        path = TREY / f"perfquery/{guid}.out"
        return ToolResult(argv, 0, path.read_text(), "", 0.01) if path.exists() else ToolResult(argv, 255, "", "x", 0.01)
    return run


def values(samples, metric):
    return {s.labels: s.value for s in samples if s.metric is metric}


def test_sweep_queries_each_node_once_with_its_linked_ports():
    calls = []
    result = sweep(FabricConfig(node_timeout_s=3.0), runner(calls=calls))
    perf = sorted(c[0] for c in calls if c[0][0] == "perfquery")
    assert ("perfquery", "-l", "-x", "-G", SWITCH, "1,10,11") in perf
    assert ("perfquery", "-l", "-x", "-G", HCA, "1") in perf
    assert all(c[1] == 3.0 for c in calls if c[0][0] == "perfquery")
    assert len(result.ports) == 9 and set(result.nodes) == {SWITCH, HCA, "0x7cfe9003003b4b96", "0x506b4b0300cc02a6",
                                                            "0x506b4b03005c2740"}


def test_a_hanging_switch_loses_its_own_counters_alone():
    state = FabricState(FabricConfig())
    state.record(sweep(FabricConfig(), runner(hang={SWITCH})))
    samples = list(state.samples(now=state.sweep.ended + 5))
    up = values(samples, m.NODE_UP)
    assert up[(SWITCH, "switch", "ib-i1l1s01")] == 0.0 and up[(HCA, "ca", "o0001 HCA-1")] == 1.0
    assert values(samples, m.NODE_QUERY_FAILURES)[(SWITCH, "timeout")] == 1.0
    received = values(samples, m.RECEIVE_BYTES)
    assert (SWITCH, "1") not in received
    assert received[(HCA, "1")] == 9752484588300 * 4
    assert values(samples, m.SWEEP_AGE)[()] == 5.0


def test_every_linked_port_is_labelled_with_its_partner():
    state = FabricState(FabricConfig())
    state.record(sweep(FabricConfig(), runner()))
    info = [s.labels for s in state.samples() if s.metric is m.PORT_INFO]
    by_port = {(labels[0], labels[1]): labels for labels in info}
    assert by_port[(SWITCH, "10")][7:] == ("ca", HCA, "1", "o0001 HCA-1")
    assert by_port[(HCA, "1")][2:4] == ("ca", "o0001 HCA-1")
    assert by_port[(HCA, "1")][7:] == ("switch", SWITCH, "10", "ib-i1l1s01")
    assert by_port[("0x506b4b03005c2740", "37")][7:] == ("", "", "", "")


def test_a_host_without_infiniband_is_one_state_not_an_error_storm(caplog):
    state = FabricState(FabricConfig())
    for _ in range(3):
        try:
            sweep(FabricConfig(), runner(no_ib=True))
        except DiscoveryFailed as exc:
            assert exc.no_infiniband
            state.record_failure(exc)
    samples = list(state.samples())
    assert values(samples, m.INFINIBAND_PRESENT)[()] == 0.0
    assert values(samples, m.SWEEPS)[("no_infiniband",)] == 3.0
    assert [r.levelname for r in caplog.records if "InfiniBand" in r.getMessage()] == ["WARNING"]



def test_switches_only_reads_every_host_link_at_its_switch_end():
    """With HCAs left out, on the simulated fabric (the recorded outputs hold no switch's host ports): no
    HCA is queried, one perfquery per switch, and every host link keeps counters and a verdict at its leaf."""
    spec = {"nodes": 4, "rails": 2, "spines": 2}
    fabric, calls = ibfabric.from_spec(spec), []

    def run(argv, timeout_s):
        calls.append(argv)
        if argv[0] == "ibnetdiscover":
            return ToolResult(argv, 0, ibtools.ibnetdiscover(fabric), "", 0.01)
        ports = [int(p) for p in argv[-1].split(",")]
        return ToolResult(argv, 0, ibtools.perfquery(spec, fabric, argv[argv.index("-G") + 1], ports, 60.0), "", 0.01)
    state = FabricState(FabricConfig(sweep_hcas=False))
    state.record(sweep(state.config, run))
    queried = sorted(c[c.index("-G") + 1] for c in calls if c[0] == "perfquery")
    assert queried == sorted(n.guid for n in fabric.nodes if n.kind == "switch")
    samples = list(state.samples(now=state.sweep.ended))
    received, health = values(samples, m.RECEIVE_BYTES), {s.labels[:2] for s in samples if s.metric is m.LINK_HEALTH}
    leaf_ends = {(node.guid, str(port)) for (_, port), (node, remote, _) in fabric.ports().items()
                 if node.kind == "switch" and remote.kind == "ca"}
    assert len(leaf_ends) == 4 * 2 and leaf_ends <= set(received) and leaf_ends <= health
    hcas = {n.guid for n in fabric.nodes if n.kind == "ca"}
    assert not [k for k in received if k[0] in hcas] and not [k for k in health if k[0] in hcas]


def raising_for(guid):
    """The runner of the recorded fabric, but raising where it would query ``guid`` (or discover, for "all")."""
    good = runner()

    def run(argv, timeout_s):
        if guid == "all" or (argv[0] == "perfquery" and argv[argv.index("-G") + 1] == guid):
            raise RuntimeError("can't start new thread")
        return good(argv, timeout_s)
    return run


def test_a_query_that_raises_loses_that_node_alone():
    result = sweep(FabricConfig(), raising_for(SWITCH))
    assert not result.nodes[SWITCH].up and result.nodes[SWITCH].failure == "failed"
    assert "can't start new thread" in result.nodes[SWITCH].error
    assert result.nodes[HCA].up and result.nodes[HCA].counters


async def test_a_sweep_that_breaks_is_counted_and_the_next_one_still_runs(caplog):
    state = FabricState(FabricConfig())
    await sweep_once(state, raising_for("all"))
    assert values(list(state.samples()), m.SWEEPS)[("failed",)] == 1.0
    assert values(list(state.samples()), m.SWEEP_SUCCESS)[()] == 0.0
    await sweep_once(state, runner())
    samples = list(state.samples())
    assert values(samples, m.SWEEPS)[("complete",)] == 1.0
    assert values(samples, m.SWEEP_SUCCESS)[()] == 1.0
