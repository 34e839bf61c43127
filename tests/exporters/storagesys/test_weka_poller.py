"""The storage exporter against a fake WEKA management API (``tests/helpers/wekafake.py``, JSON-RPC over HTTP, in
process) through the real app: a WEKA target logs in, its minutes are integrated into counters and its file systems'
capacity read; a wrong password is an ``http`` failure that never shows the password; an expired token is refreshed
(or, where the refresh fails, the user logs in again) and the poll succeeds; hung, garbage and refusing WEKA targets
are down with their reasons while the others, WEKA or MinIO, stay intact. With ``per_host: true`` the target also
reads its per-node statistics, summed per host over FRONTEND nodes, with the node and host lists asked once and again
for an unknown node id or after ten minutes; that part failing (a JSON-RPC error, garbage, no answer) loses the host
series alone. With ``per_filesystem: true`` it reads ``fs_stats`` one stat after another and counts each file system's
I/O beside its capacity; that part failing loses the file systems' I/O alone. Expected values: test_weka.py's,
worked out by hand from tests/fixtures/weka."""
from __future__ import annotations

import logging
from collections import Counter

import pytest

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import wekarpc
from lockstep.exporters.storagesys.app import POLLER, create_app
from lockstep.exporters.storagesys.config import StorageConfig, Target
from lockstep.exporters.toolkit.credentials import Credentials
from tests.helpers.exposition import parse
from tests.helpers.storagefake import FakeStorage
from tests.helpers.storagescrape import scrape_text, value
from tests.helpers.wekafake import NODE_STATS_LATER, NODES, STATS_LATER, Cluster, FakeWeka

PASSWORD = "w3ka-s3cret"


@pytest.fixture
async def weka(aiohttp_server):
    fake = FakeWeka()
    server = await aiohttp_server(fake.app())
    yield fake, f"http://127.0.0.1:{server.port}"
    fake.hung.set()


def target(base: str, name: str, password: str = PASSWORD, org: str | None = None, per_host: bool = False,
           per_filesystem: bool = False) -> Target:
    return Target(name, "weka", f"{base}/{name}", basic_auth=Credentials("lockstep-ro", password), org=org,
                  per_host=per_host, per_filesystem=per_filesystem)


async def app_for(aiohttp_client, *targets: Target, timeout_s: float = 5.0, max_answer_bytes: int = 64 << 20):
    cfg = StorageConfig(tuple(targets), interval_s=60.0, timeout_s=timeout_s, max_answer_bytes=max_answer_bytes)
    return await aiohttp_client(create_app(cfg, background=False))


async def poll(client) -> dict[tuple, float]:
    await client.app[POLLER].poll_all()
    text = await scrape_text(client)
    assert PASSWORD not in text
    return parse(text)


def cluster(samples, name: str) -> dict:
    c = dict(target=name, scope="cluster", name=name)
    return {"read": value(samples, m.READ_BYTES, **c), "write": value(samples, m.WRITE_BYTES, **c),
            "ops_read": value(samples, m.OPERATIONS, **c, op="read"), "ops_write": value(samples, m.OPERATIONS, **c, op="write"),
            "lat_read": value(samples, m.LATENCY, **c, op="read"), "lat_write": value(samples, m.LATENCY, **c, op="write")}


FIRST = {"read": 120_000_000, "write": 6_000_000, "ops_read": 12_030, "ops_write": 600,
         "lat_read": pytest.approx(3.0075), "lat_write": pytest.approx(0.3)}
SECOND = {"read": 390_000_000, "write": 66_000_000, "ops_read": 39_030, "ops_write": 4_200,
          "lat_read": pytest.approx(6.6075), "lat_write": pytest.approx(2.7)}


async def test_a_weka_target_logs_in_once_and_reads_its_counters_and_capacity(weka, aiohttp_client):
    fake, base = weka
    c = fake.add("w1", Cluster(org="research"))
    client = await app_for(aiohttp_client, target(base, "w1", org="research"))
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0
    assert value(got, m.TARGET_INFO, target="w1", kind="weka", address=f"{base}/w1") == 1.0
    assert cluster(got, "w1") == FIRST
    fs = dict(target="w1", scope="filesystem")
    assert value(got, m.USED, **fs, name="default") == 1_099_511_627_776
    assert value(got, m.CAPACITY, **fs, name="default") == 10_995_116_277_760
    assert value(got, m.USED, **fs, name="checkpoints") == 5_000_000_000_000
    assert value(got, m.CAPACITY, **fs, name="checkpoints") == 20_000_000_000_000
    assert c.calls == [("userlogin", 200), ("stats_show", 200), ("filesystems_get_capacity", 200)]
    c.stats = STATS_LATER
    got = await poll(client)
    assert cluster(got, "w1") == SECOND
    assert c.calls[3:] == [("stats_show", 200), ("filesystems_get_capacity", 200)]   # the tokens held are reused


async def test_a_wrong_password_is_an_http_failure_and_never_shown(weka, aiohttp_client, caplog):
    fake, base = weka
    fake.add("w1")
    fake.add("w2", Cluster(org="research"))
    caplog.set_level(logging.DEBUG)
    client = await app_for(aiohttp_client, target(base, "w1", password="not-" + PASSWORD), target(base, "w2"))
    got = await poll(client)
    for name in ("w1", "w2"):   # w2: the right password, but not the org the cluster wants
        assert value(got, m.UP, target=name) == 0.0
        assert value(got, m.POLL_FAILURES, target=name, reason="http") == 1.0
        assert cluster(got, name)["read"] is None
        assert PASSWORD not in client.app[POLLER].results[name].error
    assert fake.clusters["w1"].calls == [("userlogin", 200)]
    assert PASSWORD not in caplog.text
    assert {r.fields["target"]: r.fields["reason"] for r in caplog.records if r.name == "lockstep.storage"} == \
        {"w1": "http", "w2": "http"}


@pytest.mark.parametrize("refresh_fails", [False, True])
async def test_an_expired_token_is_renewed_and_the_poll_succeeds(weka, aiohttp_client, caplog, refresh_fails):
    fake, base = weka
    c = fake.add("w1", Cluster(refresh_fails=refresh_fails))
    caplog.set_level(logging.DEBUG)
    client = await app_for(aiohttp_client, target(base, "w1"))
    await poll(client)
    c.expire()
    c.stats = STATS_LATER
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0
    assert cluster(got, "w1") == SECOND
    renewal = [("user_refresh_token", 200)] + ([("userlogin", 200)] if refresh_fails else [])
    assert c.calls[3:] == [("stats_show", 401), *renewal, ("stats_show", 200), ("filesystems_get_capacity", 200)]
    assert not any(token in caplog.text for token in c.issued) and PASSWORD not in caplog.text


@pytest.mark.slow  # waits out a real (short) timeout
async def test_hung_garbage_and_refusing_weka_targets_are_down_with_their_reasons_and_the_others_intact(
        weka, aiohttp_server, aiohttp_client):
    fake, base = weka
    fake.add("good")
    fake.add("hung", Cluster(mode="hang"))
    fake.add("garbage", Cluster(mode="garbage"))
    fake.add("refusing", Cluster(errors={"stats_show": {"code": -32602, "message": "unknown stat"}}))
    storage = FakeStorage()
    storage.add("s3")
    s3 = await aiohttp_server(storage.app())
    client = await app_for(aiohttp_client, *(target(base, n) for n in ("good", "hung", "garbage", "refusing")),
                           Target("s3", "minio", f"http://127.0.0.1:{s3.port}/s3"), timeout_s=2.0)
    got = await poll(client)
    for name, reason in (("hung", "timeout"), ("garbage", "parse"), ("refusing", "http")):
        assert value(got, m.UP, target=name) == 0.0
        assert value(got, m.POLL_FAILURES, target=name, reason=reason) == 1.0, name
    assert "-32602 from stats_show: unknown stat" in client.app[POLLER].results["refusing"].error
    assert value(got, m.UP, target="good") == 1.0 and cluster(got, "good") == FIRST
    assert value(got, m.UP, target="s3") == 1.0
    assert value(got, m.READ_BYTES, target="s3", scope="bucket", name="mybucket") == 1232.0


async def test_minutes_missed_while_down_are_counted_on_recovery_and_an_answer_past_the_bound_refused(
        weka, aiohttp_client):
    fake, base = weka
    c = fake.add("w1")
    client = await app_for(aiohttp_client, target(base, "w1"))
    assert cluster(await poll(client), "w1") == FIRST
    c.mode = "garbage"
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 0.0
    assert cluster(got, "w1")["read"] is None        # a target down exports no counters
    c.mode, c.stats = "answer", STATS_LATER
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0 and cluster(got, "w1") == SECOND
    small = await app_for(aiohttp_client, target(base, "w1"), max_answer_bytes=200)   # a stats answer is ~1 KB
    got = await poll(small)
    assert value(got, m.POLL_FAILURES, target="w1", reason="parse") == 1.0


# ---- per_host: true ---------------------------------------------------------------------------------------------

def hosts(samples, name: str) -> dict[str, dict]:
    """Per host of target ``name``: its read and write bytes, and its role (host_info)."""
    out: dict[str, dict] = {}
    for (metric, labels), v in samples.items():
        d = dict(labels)
        if d.get("target") == name and d.get("scope") == "host" and metric in (m.READ_BYTES.name, m.WRITE_BYTES.name):
            out.setdefault(d["name"], {})["read" if metric == m.READ_BYTES.name else "write"] = v
        if metric == m.HOST_INFO.name and d["target"] == name:
            out.setdefault(d["name"], {})["role"] = d["role"]
    return out


# test_weka.py's HOSTS_FIRST and HOSTS_SECOND, bytes only, and each host's role (hosts-list.json)
HOSTS_FIRST = {"node00": {"read": 150_000_000, "write": 30_000_000, "role": "client"},
               "node01": {"write": 30_000_000, "role": "client"},
               "weka-backend-1": {"read": 6_000_000, "role": "server"}}
HOSTS_SECOND = {"node00": {"read": 390_000_000, "write": 96_000_000, "role": "client"},
                "node01": {"read": 120_000_000, "write": 30_000_000, "role": "client"},
                "weka-backend-1": {"read": 6_000_000, "role": "server"}}
NODE02 = {"node02": {"read": 60_000_000, "role": "client"}}
MAPS = [("nodes_list", 200), ("hosts_list", 200)]


def calls(c: Cluster, start: int = 0) -> Counter:
    return Counter(c.calls[start:])   # the part runs beside the target's own calls: their order is not fixed


async def test_per_host_reads_each_hosts_frontend_io_beside_the_cluster_and_asks_the_lists_once(weka, aiohttp_client):
    fake, base = weka
    c = fake.add("w1")
    fake.add("plain")
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True), target(base, "plain"))
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0 and cluster(got, "w1") == FIRST
    assert hosts(got, "w1") == HOSTS_FIRST
    assert value(got, m.OPERATIONS, target="w1", scope="host", name="node00", op="read") == 15_000
    assert value(got, m.LATENCY, target="w1", scope="host", name="node00", op="write") == pytest.approx(3.3)
    assert calls(c) == Counter([("userlogin", 200), ("stats_show", 200), ("filesystems_get_capacity", 200),
                                ("stats_show/per_node", 200), *MAPS])   # one login for both
    assert hosts(got, "plain") == {}
    assert all(method in ("userlogin", "stats_show", "filesystems_get_capacity") for method, _ in fake.clusters["plain"].calls)
    # the later answer: its new node NodeId<30> is in no nodes_list: asked again once, then skipped
    n = len(c.calls)
    c.stats, c.node_stats = STATS_LATER, NODE_STATS_LATER
    got = await poll(client)
    assert cluster(got, "w1") == SECOND and hosts(got, "w1") == HOSTS_SECOND
    assert calls(c, n) == Counter([("stats_show", 200), ("filesystems_get_capacity", 200),
                                   ("stats_show/per_node", 200), *MAPS])
    n = len(c.calls)
    got = await poll(client)
    assert hosts(got, "w1") == HOSTS_SECOND
    assert calls(c, n) == Counter([("stats_show", 200), ("filesystems_get_capacity", 200), ("stats_show/per_node", 200)])
    # ten minutes on, the lists are asked again
    reader = client.app[POLLER]._readers["w1"]
    now = reader.clock()
    reader.clock = lambda: now + wekarpc.MAP_TTL_S
    n = len(c.calls)
    await poll(client)
    assert calls(c, n)[("nodes_list", 200)] == 1


async def test_an_unknown_node_id_asks_the_lists_again_and_counts_a_host_they_now_name(weka, aiohttp_client):
    fake, base = weka
    c = fake.add("w1")
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True))
    await poll(client)
    c.nodes = {**NODES, "NodeId<30>": {"hostname": "node02", "roles": ["FRONTEND"]}}
    c.hosts = {**c.hosts, "HostId<5>": {"hostname": "node02", "mode": "client"}}
    c.node_stats = NODE_STATS_LATER
    n = len(c.calls)
    got = await poll(client)
    assert hosts(got, "w1") == {**HOSTS_SECOND, **NODE02}
    assert calls(c, n)[("nodes_list", 200)] == 1


@pytest.mark.parametrize(("behaviour", "reason"), [
    ({"errors": {"stats_show/per_node": {"code": -32602, "message": "unknown parameter per_node"}}}, "http"),
    ({"per_node_mode": "garbage"}, "parse"),
    ({"node_stats": {"all": {"ops": []}}}, "parse"),        # per_node not honoured: the cluster's total
    ({"errors": {"nodes_list": {"code": -32601, "message": "no method"}}}, "http"),
])
async def test_a_failing_per_host_part_loses_the_host_series_alone_counted_and_logged_once(
        weka, aiohttp_client, caplog, behaviour, reason):
    fake, base = weka
    c = fake.add("w1", Cluster(**behaviour))
    caplog.set_level(logging.DEBUG)
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True))
    for _ in range(2):
        got = await poll(client)
        assert value(got, m.UP, target="w1") == 1.0
        assert cluster(got, "w1") == FIRST
        assert hosts(got, "w1") == {}
    assert value(got, m.POLL_FAILURES, target="w1", reason=reason) == 2.0
    logged = [r for r in caplog.records if r.name == "lockstep.storage" and r.levelno >= logging.INFO]
    assert [(r.levelno, r.fields["part"], r.fields["reason"]) for r in logged] == [(logging.WARNING, "per_host", reason)]
    assert PASSWORD not in caplog.text
    # the part answers again: the host series are back (its first answer: the newest minute), the recovery logged
    c.errors, c.per_node_mode, c.node_stats = {}, "answer", Cluster().node_stats
    got = await poll(client)
    assert hosts(got, "w1") == HOSTS_FIRST
    assert value(got, m.POLL_FAILURES, target="w1", reason=reason) == 2.0
    assert [r.getMessage() for r in caplog.records if r.name == "lockstep.storage"][-1] == "storage target part recovered"


async def test_the_cluster_failing_is_the_targets_failure_whatever_the_hosts_answer(weka, aiohttp_client):
    fake, base = weka
    fake.add("w1", Cluster(errors={"filesystems_get_capacity": {"code": -32000, "message": "busy"}}))
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True))
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 0.0
    assert value(got, m.POLL_FAILURES, target="w1", reason="http") == 1.0
    assert hosts(got, "w1") == {}


@pytest.mark.parametrize("refresh_fails", [False, True])
async def test_an_expired_token_is_renewed_once_for_the_part_and_the_target_alike(weka, aiohttp_client, refresh_fails):
    fake, base = weka
    c = fake.add("w1", Cluster(refresh_fails=refresh_fails))
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True))
    await poll(client)
    c.expire()
    c.stats, c.node_stats = STATS_LATER, NODE_STATS_LATER
    n = len(c.calls)
    got = await poll(client)
    assert cluster(got, "w1") == SECOND and hosts(got, "w1") == HOSTS_SECOND
    renewals = calls(c, n)
    assert renewals[("user_refresh_token", 200)] == 1 and renewals[("userlogin", 200)] == int(refresh_fails)


# ---- per_filesystem: true ---------------------------------------------------------------------------------------

def filesystems(samples, name: str) -> dict[str, dict]:
    """Per file system of target ``name``: its read and write bytes, write operations, used and capacity bytes."""
    kinds = {m.READ_BYTES.name: "read", m.WRITE_BYTES.name: "write", m.USED.name: "used", m.CAPACITY.name: "size"}
    out: dict[str, dict] = {}
    for (metric, labels), v in samples.items():
        d = dict(labels)
        if d.get("target") == name and d.get("scope") == "filesystem" and metric in kinds:
            out.setdefault(d["name"], {})[kinds[metric]] = v
    return out


# test_weka.py's FS_FIRST, bytes only, beside filesystems-get-capacity.json's sizes
SIZES = {"default": {"used": 1099511627776, "size": 10995116277760},
         "checkpoints": {"used": 5000000000000, "size": 20000000000000}}
FS_FIRST = {"default": {"read": 120_000_000, "write": 0, **SIZES["default"]},
            "checkpoints": {"read": 0, "write": 360_000_000, **SIZES["checkpoints"]}}
FS_CALLS = [("stats_show/fs_stats", 200)] * 6


async def test_per_filesystem_reads_each_file_systems_io_one_stat_at_a_time_beside_its_capacity(weka, aiohttp_client):
    fake, base = weka
    c = fake.add("w1")
    client = await app_for(aiohttp_client, target(base, "w1", per_filesystem=True))
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0 and cluster(got, "w1") == FIRST
    assert filesystems(got, "w1") == FS_FIRST
    assert value(got, m.LATENCY, target="w1", scope="filesystem", name="checkpoints", op="write") == pytest.approx(9.0)
    first = calls(c)
    # the imaginary FSId<7>: the part asks the capacity once for it, beside the target's own ask
    assert first - Counter([("filesystems_get_capacity", 200)]) == Counter(
        [("userlogin", 200), ("stats_show", 200), ("filesystems_get_capacity", 200), *FS_CALLS])
    n = len(c.calls)
    got = await poll(client)   # the same answers: nothing newer, and FSId<7> is not asked about again
    assert filesystems(got, "w1") == FS_FIRST
    assert calls(c, n) == Counter([("stats_show", 200), ("filesystems_get_capacity", 200), *FS_CALLS])


async def test_a_deleted_file_systems_series_end_and_a_removed_clients_too(weka, aiohttp_client):
    """WEKA no longer lists them (filesystems_get_capacity, nodes_list): their counters are not served for ever."""
    fake, base = weka
    c = fake.add("w1")
    client = await app_for(aiohttp_client, target(base, "w1", per_host=True, per_filesystem=True))
    got = await poll(client)
    assert set(filesystems(got, "w1")) == {"default", "checkpoints"} and "node00" in hosts(got, "w1")
    c.capacity = {key: fs for key, fs in c.capacity.items() if fs["name"] != "default"}
    c.nodes = {key: node for key, node in NODES.items() if node.get("hostname") != "node00"}
    reader = client.app[POLLER]._readers["w1"]
    now = reader.clock()
    reader.clock = lambda: now + wekarpc.MAP_TTL_S   # the node list is asked for again
    got = await poll(client)
    assert filesystems(got, "w1") == {"checkpoints": FS_FIRST["checkpoints"]}
    assert set(hosts(got, "w1")) == {"node01", "weka-backend-1"}


@pytest.mark.parametrize(("behaviour", "reason"), [
    ({"errors": {"stats_show/fs_stats": {"code": -32602, "message": "unknown category fs_stats"}}}, "http"),
    ({"fs_mode": "garbage"}, "parse"),
    ({"fs_stats": {stat: {"all": {"fs_stats": {}}} for stat in ("READS", "WRITES", "READ_BYTES", "WRITE_BYTES",
                                                              "READ_LATENCY", "WRITE_LATENCY")}}, "parse"),
])
async def test_a_failing_per_filesystem_part_loses_the_file_systems_io_alone(weka, aiohttp_client, behaviour, reason):
    fake, base = weka
    c = fake.add("w1", Cluster(**behaviour))
    client = await app_for(aiohttp_client, target(base, "w1", per_filesystem=True))
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0 and cluster(got, "w1") == FIRST
    assert filesystems(got, "w1") == SIZES   # the capacity stays
    assert value(got, m.POLL_FAILURES, target="w1", reason=reason) == 1.0
    c.errors, c.fs_mode, c.fs_stats = {}, "answer", Cluster().fs_stats
    got = await poll(client)
    assert filesystems(got, "w1") == FS_FIRST


@pytest.mark.slow  # waits out a real (short) timeout
@pytest.mark.parametrize("part", ["per_host", "per_filesystem"])
async def test_a_hung_part_times_out_alone_within_the_polls_timeout(weka, aiohttp_client, part):
    fake, base = weka
    fake.add("w1", Cluster(**{"per_node_mode" if part == "per_host" else "fs_mode": "hang"}))
    client = await app_for(aiohttp_client, target(base, "w1", **{part: True}), timeout_s=2.0)
    got = await poll(client)
    assert value(got, m.UP, target="w1") == 1.0 and cluster(got, "w1") == FIRST
    assert value(got, m.POLL_FAILURES, target="w1", reason="timeout") == 1.0
    assert hosts(got, "w1") == {}
    assert filesystems(got, "w1") == SIZES   # the capacity stays; the file systems' I/O is the part's
    assert 2.0 <= value(got, m.POLL_DURATION, target="w1") < 3.0
