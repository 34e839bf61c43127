"""``infiniband`` collector: golden exposition on the real captured trees and their variants."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockstep.exporters import cli
from lockstep.exporters.collectors.infiniband import InfinibandCollector, InfinibandOptions, parse_expected_rates
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from lockstep.stack import require_binary
from tests.helpers.exporter_args import exporter_config
from tests.helpers.needs import platform_lacks
from tests.helpers.paths import FIXTURES, REPO

SYSFS = FIXTURES / "sysfs"
REAL = SYSFS / "real"
VARIANTS = SYSFS / "variants"


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def scrape(root: Path, *rates: str) -> str:
    collector = InfinibandCollector(InfinibandOptions(root, parse_expected_rates(rates)))
    try:
        return render(collector)
    finally:
        collector.close()


def values(text: str, name: str) -> dict[str, float]:
    return {line.split(" ")[0][len(name):]: float(line.split(" ")[1])
            for line in text.splitlines() if line.startswith(name + "{")}


def holds(collector, directory: Path) -> bool:
    """Whether the collector holds a descriptor of a file under ``directory``."""
    return any(p.startswith(f"{directory}/") for p in collector.scan.files._held)


def writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    for base, dirs, files in os.walk(dst):
        for name in dirs + files:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if name in dirs else 0o644)
    return dst


@pytest.mark.parametrize("tree", ["real", "variants/saturated", "variants/missing", "variants/rails"])
def test_golden(tree, golden):
    golden(f"fabric/infiniband_{tree.replace('variants/', '')}.prom", scrape(SYSFS / tree))


def test_real_tree_facts():
    text = scrape(REAL)
    # mlx5 port_xmit_data 2880761508848 words = 11523046035392 octets
    assert values(text, "lockstep_ib_port_transmit_bytes_total")['{device="mlx5_0",port="1"}'] == 11523046035392
    # i40iw's counters all read "N/A (no PMA)": no counter series at all, but state and rate are there
    assert "i40iw0" not in "".join(line for line in text.splitlines() if "_total{" in line)
    assert values(text, "lockstep_ib_port_rate_bytes_per_second")['{device="i40iw0",port="1"}'] == 1.25e9


def test_saturated_counters_are_flagged_not_reported():
    text = scrape(VARIANTS / "saturated")
    assert values(text, "lockstep_ib_port_counter_saturated") == {
        '{device="mlx4_0",port="2",counter="link_downed"}': 1,
        '{device="mlx4_0",port="2",counter="port_xmit_data"}': 1,
        '{device="mlx4_0",port="2",counter="symbol_error"}': 1}
    sent = values(text, "lockstep_ib_port_transmit_bytes_total")
    assert sent == {'{device="mlx4_0",port="1"}': 26509113295 * 4}  # from counters_ext; port 2 withheld


def test_link_degraded_against_expected_rate():
    text = scrape(REAL, "mlx5_*=100", "mlx4_*=40")
    assert values(text, "lockstep_ib_port_link_degraded") == {
        '{device="mlx4_0",port="1"}': 0, '{device="mlx4_0",port="2"}': 0, '{device="mlx5_0",port="1"}': 1}
    assert values(text, "lockstep_ib_port_expected_rate_bytes_per_second")['{device="mlx5_0",port="1"}'] == 12.5e9


def test_down_port_is_not_degraded(tmp_path):
    root = writable_copy(REAL, tmp_path / "sys")
    (root / "class/infiniband/mlx5_0/ports/1/state").write_text("1: DOWN\n")
    assert values(scrape(root, "mlx5_*=100"), "lockstep_ib_port_link_degraded") == {'{device="mlx5_0",port="1"}': 0}


def test_hot_unplug_and_replug(tmp_path):
    root = writable_copy(REAL, tmp_path / "sys")
    collector = InfinibandCollector(InfinibandOptions(root))
    assert 'device="mlx5_0"' in render(collector)
    shutil.move(root / "class/infiniband/mlx5_0", tmp_path / "away")
    assert 'device="mlx5_0"' not in render(collector)
    shutil.move(tmp_path / "away", root / "class/infiniband/mlx5_0")
    (root / "class/infiniband/mlx5_0/ports/1/counters/symbol_error").write_text("7\n")
    assert values(render(collector), "lockstep_ib_port_symbol_errors_total")['{device="mlx5_0",port="1"}'] == 7
    collector.close()


def _scraped_copy(tmp_path: Path) -> tuple[Path, InfinibandCollector]:
    """A writable copy of the real sysfs tree and a collector that has scraped it once."""
    root = writable_copy(REAL, tmp_path / "sys")
    collector = InfinibandCollector(InfinibandOptions(root))
    collector.collect()
    return root, collector


def test_descriptors_of_a_vanished_port_are_closed_at_rediscovery(tmp_path, monkeypatch):
    """A port that disappears while its device stays (a port unbound, a split undone) must not keep its
    held descriptors until close(): they leak one set per such event."""
    monkeypatch.setattr("lockstep.exporters.fabric.device_scan.REDISCOVER_S", 0.0)
    root, collector = _scraped_copy(tmp_path)
    port2 = root / "class/infiniband/mlx4_0/ports/2"
    assert holds(collector, port2)
    shutil.move(port2, tmp_path / "away")
    assert not [s for s in collector.collect() if s.labels[:2] == ("mlx4_0", "2")]
    assert not holds(collector, port2)
    collector.close()

PERMISSION_SCRIPT = """
import sys
from pathlib import Path
from lockstep.exporters.collectors.infiniband import InfinibandCollector, InfinibandOptions
from lockstep.exporters.toolkit.exposition import Encoder, render_text
families = {}
Encoder().add(families, InfinibandCollector(InfinibandOptions(Path(sys.argv[1]))).collect())
sys.stdout.write(render_text(families))
"""


@pytest.mark.integration
def test_permission_denied_is_absent(tmp_path, golden):
    """Unreadable files (0000, read without CAP_DAC_OVERRIDE) are absent, the rest of the device is kept."""
    setpriv = require_binary("setpriv")   # drops CAP_DAC_OVERRIDE, so that a file of mode 0 is unreadable
    root = writable_copy(REAL, tmp_path / "sys")
    for rel in ("mlx5_0/board_id", "mlx5_0/ports/1/counters/port_xmit_data", "mlx4_0/ports/2/rate",
                "hfi1_0/ports/1/state"):
        os.chmod(root / "class/infiniband" / rel, 0)
    caps = "-dac_override,-dac_read_search"
    proc = subprocess.run([setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", sys.executable, "-c",
                           PERMISSION_SCRIPT, str(root)], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    if proc.returncode != 0 and "setpriv" in proc.stderr:
        platform_lacks(f"cannot drop capabilities here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert "permission denied" in proc.stderr
    golden("fabric/infiniband_permission_denied.prom", proc.stdout)


def test_flags_reach_the_collector():
    config = exporter_config(f"--path.sysfs={REAL}", "--infiniband.expected-rate=mlx5_*=100")
    text = render(cli.build_collectors(config, cli.registry.load())["infiniband"])
    assert values(text, "lockstep_ib_port_link_degraded") == {'{device="mlx5_0",port="1"}': 1}


def test_bad_expected_rate_stops_the_agent():
    config = exporter_config(f"--path.sysfs={REAL}", "--infiniband.expected-rate=mlx5_*")
    with pytest.raises(ValueError, match="expected-rate"):
        cli.build_collectors(config, cli.registry.load())


def test_malformed_files_are_logged_and_skipped(tmp_path, caplog):
    root = writable_copy(REAL, tmp_path / "sys")
    port = root / "class/infiniband/mlx4_0/ports/1"
    (port / "state").write_text("ACTIVE\n")
    (port / "rate").write_text("fast\n")
    (port / "counters/symbol_error").write_text("many\n")
    with caplog.at_level("WARNING", logger="lockstep.collector.infiniband"):
        text = scrape(root)
    mlx4_1 = '{device="mlx4_0",port="1"}'
    assert mlx4_1 not in "".join(values(text, "lockstep_ib_port_state"))
    assert mlx4_1 not in "".join(values(text, "lockstep_ib_port_symbol_errors_total"))
    assert values(text, "lockstep_ib_port_transmit_wait_total")[mlx4_1] == 3599  # the rest of the port stays
    assert values(text, "lockstep_ib_port_state")['{device="mlx4_0",port="2"}'] == 4
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "mlx4_0/ports/1/state" in messages and "counters/symbol_error" in messages and "rate" in messages


def test_counters_ext_without_a_value_falls_back_to_the_legacy_file(tmp_path):
    root = writable_copy(VARIANTS / "saturated", tmp_path / "sys")
    port = root / "class/infiniband/mlx4_0/ports/1"
    (port / "counters_ext/port_xmit_data_64").write_text("N/A (no PMA)\n")
    (port / "counters/port_xmit_data").write_text("1000\n")
    (port / "counters_ext/port_rcv_data_64").unlink()
    (port / "counters/port_rcv_data").write_text("4294967295\n")  # the fallback is legacy: pinned
    text = scrape(root)
    mlx4_1 = '{device="mlx4_0",port="1"}'
    assert values(text, "lockstep_ib_port_transmit_bytes_total")[mlx4_1] == 4000
    assert mlx4_1 not in "".join(values(text, "lockstep_ib_port_receive_bytes_total"))
    assert values(text, "lockstep_ib_port_counter_saturated")['{device="mlx4_0",port="1",counter="port_rcv_data"}'] == 1


def test_state_and_counters_follow_changes_between_scrapes(tmp_path):
    """Parsed state and rate texts are cached: a changed text must still be seen on the next scrape."""
    root = writable_copy(REAL, tmp_path / "sys")
    port = root / "class/infiniband/mlx5_0/ports/1"
    collector = InfinibandCollector(InfinibandOptions(root))
    mlx5 = '{device="mlx5_0",port="1"}'
    assert values(render(collector), "lockstep_ib_port_state")[mlx5] == 4
    for state, rate, errors in (("1: DOWN\n", "10 Gb/sec (4X)\n", "65534\n"), ("4: ACTIVE\n", "fast\n", "65535\n")):
        (port / "state").write_text(state)  # rewritten in place, as sysfs and the simulator do
        (port / "rate").write_text(rate)
        (port / "counters/symbol_error").write_text(errors)
        text = render(collector)
        assert values(text, "lockstep_ib_port_state")[mlx5] == int(state[0])
        assert values(text, "lockstep_ib_port_rate_bytes_per_second").get(mlx5) == (1.25e9 if rate[0] == "1" else None)
        assert values(text, "lockstep_ib_port_symbol_errors_total").get(mlx5) == (65534 if errors == "65534\n" else None)
    collector.close()


def test_a_vanished_device_costs_no_syscall_and_holds_no_descriptor(tmp_path, monkeypatch):
    """Hot-unplug: the device leaves the class listing (read once per scrape anyway). Its descriptors
    are closed at that scrape and nothing tries to open its files again until it returns."""
    root, collector = _scraped_copy(tmp_path)
    gone = root / "class/infiniband/mlx5_0"
    assert holds(collector, gone)
    shutil.move(gone, tmp_path / "away")
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    for _ in range(3):
        assert not [s for s in collector.collect() if s.labels[:1] == ("mlx5_0",)]
    assert not holds(collector, gone)
    assert not [p for p in opened if p.startswith(f"{gone}/")]
    collector.close()


def test_the_class_directory_gone_reads_as_no_data_and_comes_back(tmp_path, caplog):
    """The RDMA core unloaded: /sys/class/infiniband itself is gone. The infiniband and roce collectors
    report success 0 (not an error in the log each scrape) and hold nothing; the rest of the scrape is
    untouched; when the directory returns (new directories, new files) they read it afresh."""
    from lockstep.exporters.collectors.roce import RoceCollector, RoceOptions
    from lockstep.exporters.scrape import Scraper

    root = writable_copy(REAL, tmp_path / "sys")
    ib = InfinibandCollector(InfinibandOptions(root))
    other = type("Other", (), {"collect": lambda self: []})()   # any collector not reading the class
    scraper = Scraper({"infiniband": ib, "roce": RoceCollector(RoceOptions(root)), "other": other})
    success = '{collector="%s"}'
    assert values(scraper.render(), "lockstep_scrape_collector_success")[success % "infiniband"] == 1
    shutil.move(root / "class/infiniband", tmp_path / "away")
    with caplog.at_level("DEBUG"):
        for _ in range(2):
            text = scraper.render()
            ok = values(text, "lockstep_scrape_collector_success")
            assert (ok[success % "infiniband"], ok[success % "roce"], ok[success % "other"]) == (0, 0, 1)
    assert len(ib.scan.files) == 0 and not [r for r in caplog.records if r.levelname == "ERROR"]
    # once per collector that reads the class, at the change only
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == ["RDMA class directory absent"] * 2
    shutil.copytree(tmp_path / "away", root / "class/infiniband", symlinks=True)
    (root / "class/infiniband/mlx5_0/ports/1/counters/symbol_error").write_text("9\n")
    text = scraper.render()
    assert values(text, "lockstep_scrape_collector_success")[success % "infiniband"] == 1
    assert values(text, "lockstep_ib_port_symbol_errors_total")['{device="mlx5_0",port="1"}'] == 9
    scraper.close()


@pytest.fixture
def veth():
    """A real network device whose sysfs attributes a test may hold open, then delete (as a hot-unplug
    or driver reload deletes an HCA's): needs root and iproute2."""
    name = f"lsv{os.getpid() % 100000}"
    made = subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        platform_lacks(f"cannot create a veth pair here (needs CAP_NET_ADMIN): {made.stderr.strip()}")
    yield name
    subprocess.run(["ip", "link", "del", name], capture_output=True)


@pytest.mark.integration
def test_descriptors_of_a_reloaded_device_fail_with_enodev_and_reopen(tmp_path, veth):
    """Real kernfs: a held descriptor of a deleted device's attribute fails with ENODEV (what an HCA
    does on driver reload). A device that went and came back between two scrapes (same name, same
    listing) is read through a fresh descriptor; one that stays gone reads as absent, its descriptor
    closed. The counter file links to the veth's tx_bytes attribute."""
    root = writable_copy(REAL, tmp_path / "sys")
    counter = root / "class/infiniband/mlx5_0/ports/1/counters/symbol_error"
    counter.unlink()
    counter.symlink_to(f"/sys/class/net/{veth}/statistics/tx_bytes")
    collector = InfinibandCollector(InfinibandOptions(root))
    key = '{device="mlx5_0",port="1"}'
    assert values(render(collector), "lockstep_ib_port_symbol_errors_total")[key] == 0
    fd = collector.scan.files._held[str(counter)]
    before = os.fstat(fd).st_ino
    for command in (["del", veth], ["add", veth, "type", "veth", "peer", "name", veth + "p"]):
        subprocess.run(["ip", "link", *command], check=True, capture_output=True)
    with pytest.raises(OSError) as err:
        os.pread(fd, 64, 0)
    assert err.value.errno == errno.ENODEV
    assert values(render(collector), "lockstep_ib_port_symbol_errors_total")[key] == 0
    assert os.fstat(collector.scan.files._held[str(counter)]).st_ino != before   # the new device's attribute
    subprocess.run(["ip", "link", "del", veth], check=True, capture_output=True)
    held = len(collector.scan.files)
    assert key not in values(render(collector), "lockstep_ib_port_symbol_errors_total")
    assert len(collector.scan.files) == held - 1
    collector.close()
