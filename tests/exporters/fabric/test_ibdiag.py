"""The infiniband-diags parsers on real captured outputs (tests/fixtures/infiniband-diags/README.md)."""
from __future__ import annotations

import pytest

from lockstep.exporters.fabric.ibdiag import (
    IbDiagError,
    PortEnd,
    no_infiniband,
    parse_ibnetdiscover,
    parse_line,
    parse_perfquery,
)
from tests.helpers.paths import FIXTURES

IBD = FIXTURES / "infiniband-diags"


def read(path: str) -> str:
    return (IBD / path).read_text()


def test_ibnetdiscover_edr_fabric_with_partners():
    fabric = parse_ibnetdiscover(read("treydock/ibnetdiscover/test.out"))
    assert len(fabric.ports) == 9 and fabric.unreadable_lines == 0
    first = fabric.ports[0]
    assert first.local == PortEnd("ca", 134, 1, "0x7cfe9003003b4bde", "o0001 HCA-1")
    assert first.remote == PortEnd("switch", 1719, 10, "0x7cfe9003009ce5b0", "ib-i1l1s01")
    assert (first.width, first.speed, first.rate_bits_per_second) == (4, "EDR", 100e9)
    uplink = fabric.ports[5]
    assert uplink.remote == PortEnd("switch", 1516, 1, "0x7cfe900300b07320", "ib-i1l2s01")
    unknown_speed = fabric.ports[7]
    assert unknown_speed.local == PortEnd("switch", 2052, 37, "0x506b4b03005c2740", "ib-i4l1s01")
    assert (unknown_speed.width, unknown_speed.speed, unknown_speed.remote) == (4, None, None)
    assert unknown_speed.rate_bits_per_second is None


def test_ibnetdiscover_hdr_names_are_stripped_and_unquoted_names_kept():
    fabric = parse_ibnetdiscover(read("treydock/ibnetdiscover/test2.out"))
    assert [p.local.name for p in fabric.ports] == [
        "Mellanox Technologies Aggregation Node", "worker20 mlx5_3", "5FB0406-spine-IB01", "5FB0406-spine-IB02",
        "5FB0406-spine-IB03", "Infiniscale-IV Mellanox Technologies"]
    assert fabric.ports[1].remote.name == "5FB0405-leaf-IB01" and fabric.ports[1].remote.port == 79
    assert fabric.ports[5].speed == "QDR" and fabric.ports[5].local.port == 22
    old = parse_ibnetdiscover(read("treydock/ibnetdiscover/test3.out")).ports
    assert old[0].local == PortEnd("switch", 479, 22, "0x0002c9020040f161", "Infiniscale-IV Mellanox Technologies")


def test_an_unreadable_line_loses_that_port_alone():
    lines = read("treydock/ibnetdiscover/test.out").splitlines()
    lines[1] = "CA   133  1 0xZZZ 4x EDR - SW  1719 11"
    fabric = parse_ibnetdiscover("\n".join(lines))
    assert fabric.unreadable_lines == 1 and len(fabric.ports) == 8
    assert parse_line("hello") is None


def test_text_that_is_not_ibnetdiscover_output_is_an_error():
    with pytest.raises(IbDiagError, match="no line reads"):
        parse_ibnetdiscover(read("local/ibnetdiscover-no-ib.stdout"))
    assert parse_ibnetdiscover("").ports == ()


def test_perfquery_extended_switch_two_ports():
    blocks = parse_perfquery(read("treydock/perfquery/0x7cfe9003009ce5b0.out"))
    assert [(b.lid, b.port, b.extended) for b in blocks] == [(1719, 1, True), (1719, 2, True)]
    one = blocks[0].values
    assert one["PortXmitData"] == 36298026860928 * 4   # 4-octet words to octets
    assert one["PortRcvPkts"] == 32262508468
    assert one["PortXmitWait"] == 22730501 and one["SymbolErrorCounter"] == 0
    assert one["CounterSelect2"] == 0 and blocks[1].values["PortXmitWait"] == 36510964


def test_perfquery_empty_output_is_no_blocks_and_garbage_is_an_error():
    assert parse_perfquery(read("treydock/perfquery/0x506b4b0300cc02a6.out")) == ()
    with pytest.raises(IbDiagError):
        parse_perfquery(read("local/perfquery-no-ib.stdout"))


def test_perfquery_malformed_value_loses_that_field_alone():
    text = read("treydock/perfquery/0x7cfe9003003b4bde.out").replace("LinkDownedCounter:...............0",
                                                                     "LinkDownedCounter:...............x7")
    values = parse_perfquery(text)[0].values
    assert "LinkDownedCounter" not in values and values["LinkErrorRecoveryCounter"] == 0


def test_no_infiniband_recognises_the_real_messages():
    for tool in ("ibnetdiscover", "perfquery"):
        assert no_infiniband(read(f"local/{tool}-no-ib.stdout") + read(f"local/{tool}-no-ib.stderr"))
    assert not no_infiniband("ibwarn: [9] mad_rpc: _do_madrpc failed; dport (Lid 1719)")
