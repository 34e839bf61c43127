"""The simulated fabric (simulator/ibfabric.py) and its ibnetdiscover/perfquery (simulator/ibtools.py): the
printed lines are byte for byte what the real tools printed in the recorded outputs, the topology is the
two-tier, 8-rail one of 128 nodes, and the faults move the counters they name."""
from __future__ import annotations

import re

import pytest

from lockstep.exporters.fabric.ibdiag import parse_ibnetdiscover, parse_line, parse_perfquery
from lockstep.simulator import ibfabric, ibtools
from lockstep.simulator.ibfabric import Node
from tests.helpers.paths import FIXTURES

RECORDED = FIXTURES / "infiniband-diags/treydock"
KINDS = {"switch": "switch", "ca": "ca"}


def test_a_linked_port_line_is_printed_as_ibnetdiscover_printed_it() -> None:
    lines = [line for name in ("test.out", "test2.out")
             for line in (RECORDED / "ibnetdiscover" / name).read_text().splitlines() if " - " in line and "( '" in line]
    assert len(lines) >= 5
    for line in lines:
        port = parse_line(line)
        if re.search(r"' | '", line.split("( ", 1)[1][1:-2]):
            continue   # descriptions with blanks at their ends inside the quotes, which the simulator never writes
        local = Node(port.local.kind, port.local.guid, port.local.lid, port.local.name)
        remote = Node(port.remote.kind, port.remote.guid, port.remote.lid, port.remote.name)
        assert ibtools.port_line(local, port.local.port, remote, port.remote.port, port.width, port.speed) == line


def test_a_counter_block_is_printed_as_perfquery_printed_it() -> None:
    files = 0
    for path in (RECORDED / "perfquery").glob("0x*.out"):
        text = path.read_text()
        if not text:
            continue   # the recorded empty answer of an HCA
        capmasks = re.findall(r"(?m)^# Port extended counters: .*\((CapMask: .*)\)$", text)
        blocks = [ibtools.counter_block(c.lid, c.port, capmask, c.values)
                  for c, capmask in zip(parse_perfquery(text), capmasks, strict=True)]
        assert ibtools.output(blocks) == text
        files += 1
    assert files == 4


def test_the_128_node_fabric_is_two_tier_rail_optimised_and_fully_cabled() -> None:
    fabric = ibfabric.build()
    cas = [n for n in fabric.nodes if n.kind == "ca"]
    leaves = [n for n in fabric.nodes if n.name.startswith("ib-leaf")]
    spines = [n for n in fabric.nodes if n.name.startswith("ib-spine")]
    assert (len(cas), len(leaves), len(spines)) == (128 * 8, 32, 16)
    assert len({n.guid for n in fabric.nodes}) == len({n.lid for n in fabric.nodes}) == len(fabric.nodes)
    ports = fabric.ports()
    for link in fabric.links:
        if link.a.kind == "ca":   # node NN's HCA mlx5_R sits on a leaf of rail R
            rail = link.a.name.split("mlx5_")[1]
            assert link.b.name.startswith(f"ib-leaf-r{rail}-")
        else:                     # every leaf uplink goes to a spine
            assert link.b.name.startswith("ib-spine-")
    for switch in leaves + spines:
        assert sorted(p for g, p in ports if g == switch.guid) == list(range(1, 65))
    parsed = parse_ibnetdiscover(ibtools.ibnetdiscover(fabric))
    assert parsed.unreadable_lines == 0 and len(parsed.ports) == len(ports) == 1024 + 32 * 64 + 16 * 64
    for port in parsed.ports:
        node, remote, remote_port = ports[(port.local.guid, port.local.port)]
        assert (port.remote.guid, port.remote.port, port.remote.name) == (remote.guid, remote_port, remote.name)


def test_the_faults_move_their_counters_on_their_ports_alone() -> None:
    spec = {"nodes": 4, "rails": 2, "spines": 2, "faults": [
        {"kind": "marginal_cable", "node": "node01", "hca": 1, "start_s": 100, "errors_per_s": 2.5},
        {"kind": "link_flap", "node": "node02", "hca": 0, "start_s": 10, "end_s": 40, "flaps": 3}]}
    fabric = ibfabric.from_spec(spec)
    ports = fabric.ports()
    ca = {n.name: n for n in fabric.nodes}

    def read(name: str, t: float, port: int = 1) -> dict:
        node = ca[name]
        [block] = parse_perfquery(ibtools.perfquery(spec, fabric, node.guid, [port], t))
        return dict(block.values)
    assert read("node01 mlx5_1", 100)["SymbolErrorCounter"] == 0
    assert read("node01 mlx5_1", 140)["SymbolErrorCounter"] == 100
    assert read("node01 mlx5_0", 140)["SymbolErrorCounter"] == 0
    assert [read("node02 mlx5_0", t)["LinkDownedCounter"] for t in (9, 10, 25, 39, 500)] == [0, 1, 2, 3, 3]
    _, leaf, leaf_port = ports[(ca["node02 mlx5_0"].guid, 1)]
    assert read(leaf.name, 25, leaf_port)["LinkDownedCounter"] == 2          # the other end counts it too
    assert read("node03 mlx5_0", 500)["LinkDownedCounter"] == 0
    assert read("node03 mlx5_0", 10)["PortXmitData"] == int(ibfabric.RATE_BYTES_PER_S * ibfabric.UTILISATION * 10) // 4 * 4


def test_a_worsening_cable_counts_the_integral_of_its_rising_error_rate() -> None:
    fault = {"kind": "marginal_cable", "node": "node01", "hca": 1, "start_s": 100, "errors_per_s": 2, "rising_per_s": 4}
    spec = {"nodes": 4, "rails": 2, "spines": 2, "faults": [fault]}
    fabric = ibfabric.from_spec(spec)
    guid = next(n.guid for n in fabric.nodes if n.name == "node01 mlx5_1")
    counts = {t: dict(parse_perfquery(ibtools.perfquery(spec, fabric, guid, [1], t))[0].values)["SymbolErrorCounter"]
              for t in (50, 100, 110, 120)}
    assert counts == {50: 0, 100: 0, 110: 2 * 10 + 4 * 100 // 2, 120: 2 * 20 + 4 * 400 // 2}
    assert (ibfabric.error_rate(fault, 99), ibfabric.error_rate(fault, 110)) == (0.0, 42.0)


def test_the_cable_costs_the_job_one_round_trip_of_resends_per_symbol_error() -> None:
    """At 4x NDR and 30% utilisation, 1,500 errors a second resend 1,500 x 2 us of the link's full rate:
    0.3% of its time, 1% of the job's 30% share."""
    assert ibfabric.goodput_loss(1500.0) == pytest.approx(0.01)
    assert ibfabric.slowing_error_rate() == pytest.approx(1500.0)
    assert ibfabric.goodput_loss(1e9) == 1.0
    # The bit-error budget the verdicts hold a link to (1e-12 x 400 Gb/s = 0.4 errors/s) is far below it.
    assert 1e-12 * ibfabric.RATE_BYTES_PER_S * 8 < ibfabric.slowing_error_rate() / 1000


@pytest.mark.integration
def test_the_tool_server_prints_what_each_tool_call_prints_and_an_unreachable_switch_never_answers(tmp_path) -> None:
    """The client of ``ToolServer`` against ``python -m lockstep.simulator.ibtools``, the same calls; the spec's
    time does not move (speed 0), so perfquery's counters are the same either way."""
    import json
    import shlex
    import subprocess
    import sys

    spec_path = tmp_path / "fabric.json"
    spec_path.write_text(json.dumps({"nodes": 4, "rails": 2, "spines": 2, "start_timestamp": 0, "speed": 0,
                                     "unreachable": ["ib-spine-1"],
                                     "faults": [{"kind": "marginal_cable", "node": "node01", "hca": 1, "start_s": 0,
                                                 "errors_per_s": 1.0}]}))
    fabric = ibfabric.from_spec(json.loads(spec_path.read_text()))
    hca = next(n for n in fabric.nodes if n.name == "node01 mlx5_1")
    spine = next(n for n in fabric.nodes if n.name == "ib-spine-1")
    server = ibtools.ToolServer(spec_path)
    try:
        for tool, args in (("ibnetdiscover", ["-p"]), ("perfquery", ["-l", "-x", "-G", hca.guid, "1"])):
            direct = subprocess.run([sys.executable, "-m", "lockstep.simulator.ibtools", str(spec_path), tool, *args],
                                    capture_output=True, text=True, timeout=60, check=True).stdout
            served = subprocess.run([*shlex.split(server.command(tool)), *args], capture_output=True, text=True,
                                    timeout=60, check=True).stdout
            assert served == direct and direct.strip()
        hung = subprocess.Popen([*shlex.split(server.command("perfquery")), "-l", "-x", "-G", spine.guid, "1,2"],
                                stdout=subprocess.PIPE)
        with pytest.raises(subprocess.TimeoutExpired):
            hung.communicate(timeout=2)     # as the wedged switch: it waits to be killed
        hung.kill()
        assert hung.wait(30) != 0 and hung.stdout.read() == b""
    finally:
        server.close()
