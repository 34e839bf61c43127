"""Corrupt lines in real captured procfs/Lustre/ethtool files: each loses its own item (disk, mount,
entry, interface), never the rest of the file. The corruptions are the kind a flipped byte or a
broken driver produces: a digit that ``str.isdigit()`` accepts but ``int()`` refuses ("²"), a
non-ASCII decimal digit, and a number past u64 (5,000 digits: past ``int()``'s own limit too)."""
from __future__ import annotations

import re
import subprocess
import threading

import pytest

from lockstep.exporters.fabric.ethtool import DirEthtool, parse_driver, parse_ethtool_stats
from lockstep.exporters.storage.diskstats import DEFAULT_INCLUDE, parse_diskstats
from lockstep.exporters.storage.llite import parse_llite_stats
from lockstep.exporters.storage.mountstats import parse_mountstats
from tests.helpers.paths import FIXTURES

PROC = FIXTURES / "procfs"
LLITE = PROC / "fs/lustre/llite/lustrefs-ffff88105db50000/stats"
CORRUPT = ("1²", "1\u0663", "9" * 5000)  # superscript two; ARABIC-INDIC DIGIT THREE; past u64


def _corrupt_line(text: str, pattern: str, token: str) -> str:
    """``text`` with the first number after ``pattern`` replaced by ``token``."""
    corrupted, n = re.subn(pattern + r"(\s+)\d+", lambda m: m[0][: -len(m[0].split()[-1])] + token, text, count=1)
    assert n == 1, pattern
    return corrupted


@pytest.mark.parametrize("token", CORRUPT)
def test_a_corrupt_diskstats_line_loses_only_its_disk(token):
    text = (PROC / "diskstats").read_text()
    whole = {d.device: d for d in parse_diskstats(text, re.compile(DEFAULT_INCLUDE))}
    victim = sorted(whole)[0]
    errors: list[str] = []
    left = {d.device: d for d in parse_diskstats(_corrupt_line(text, rf" {victim}", token),
                                                 re.compile(DEFAULT_INCLUDE), errors)}
    assert left == {k: v for k, v in whole.items() if k != victim}
    assert len(errors) == 1 and errors[0].startswith(victim)


@pytest.mark.parametrize("token", CORRUPT)
def test_a_corrupt_llite_line_loses_only_that_entry(token):
    text = LLITE.read_text()
    whole = parse_llite_stats(text)
    left = parse_llite_stats(_corrupt_line(text, r"\nopen", token))
    assert dict(left.metadata_ops) == {k: v for k, v in whole.metadata_ops if k != "open"}
    assert (left.read_bytes, left.write_bytes) == (whole.read_bytes, whole.write_bytes)


@pytest.mark.parametrize("token", CORRUPT)
def test_a_corrupt_mountstats_bytes_line_loses_only_its_mount(token):
    text = (PROC / "self/mountstats").read_text()
    (good,) = parse_mountstats(text)
    second = text[text.index("device 192.168.1.1:"):].replace("/mnt/nfs/test", "/mnt/nfs/other", 1)
    errors: list[str] = []
    mounts = parse_mountstats(text + _corrupt_line(second, r"bytes:", token), errors)
    assert mounts == [good]
    assert errors and errors[0].startswith("/mnt/nfs/other")


@pytest.mark.parametrize("token", CORRUPT)
def test_a_corrupt_ethtool_value_is_a_value_error_naming_the_line(token):
    text = (FIXTURES / "ethtool/node/ens1np0/statistics").read_text()
    with pytest.raises(ValueError, match="stats.txt: line 2"):
        parse_ethtool_stats(_corrupt_line(text, r"\n\s+\S+:", token), "stats.txt")


def test_the_ethtool_parser_is_linear_on_a_long_line_of_blanks():
    """Before: a regex with nested blanks took 0.8 s for one 8 KB line (quadratic): this 128 KB one
    would take minutes. The deadline is generous; the parse itself takes milliseconds."""
    text = "NIC statistics:\n     rx_packets: 12\n" + " \t" * 65536 + "x\n"
    outcome: list[BaseException] = []

    def parse() -> None:
        try:
            parse_ethtool_stats(text, "stats.txt")
        except ValueError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=parse, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the parse is still running after 60 s"
    assert "line 3" in str(outcome[0])


@pytest.mark.integration
def test_ethtool_dash_i_saved_as_the_driver_file(tmp_path, netns):
    """Before: the whole ``ethtool -i`` output became the driver name, so no counter table matched.
    The output here is the real tool's, on a veth pair of the test's own namespace."""
    info = subprocess.run(["ip", "netns", "exec", netns, "ethtool", "-i", "lsa0"], check=True,
                          capture_output=True, text=True, timeout=30).stdout
    assert info.startswith("driver: veth\n") and "bus-info:" in info
    iface = tmp_path / "lsa0"
    iface.mkdir()
    (iface / "driver").write_text(info)
    (iface / "statistics").write_text("NIC statistics:\n     peer_ifindex: 2\n")
    assert DirEthtool(tmp_path).stats("lsa0").driver == "veth"
    assert parse_driver("mlx5_core\n") == "mlx5_core"  # the plain one-line form still reads
