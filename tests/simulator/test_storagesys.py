"""The simulated storage systems (simulator/storagesys.py, storagesys_app.py) read by the storage exporter's own
parsers: the checkpoint scenario's two checkpoints (2 TB each, at 100-130 s and 200-230 s) land whole in the MinIO
bucket and in WEKA's ``checkpoints`` file system, VAST serves the job's dataset reads and its other writes, every
counter only grows, latency rises with load; VAST's views (``/api/prometheusmetrics/views``) split that traffic, the
dataset reads on ``/datasets`` and the logs on ``/logs``; WEKA per node: each job node's FRONTEND writes its share of
the checkpoints, its host's counters summing to the cluster's; and over HTTP, through the real exporter, with the
systems' own authentication, the written config reading VAST's views and WEKA's hosts."""
from __future__ import annotations

import stat

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys import minio, vast, weka
from lockstep.exporters.storagesys.app import POLLER, create_app
from lockstep.exporters.storagesys.config import load_config
from lockstep.exporters.toolkit.credentials import basic_auth
from lockstep.simulator import redfish, storagesys_app
from lockstep.simulator import storagesys as sim
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import load_scenario
from tests.helpers.sim_scenarios import SHIPPED, exact

CHECKPOINT_BYTES = 2.0e12


def run(scenario):
    """(state's job bytes, systems) after each tick of the scenario (the same ``Systems``, advanced)."""
    states = Model(scenario).states(scenario.ticks)
    first = next(states)
    systems = sim.Systems(first, scenario.sample_period_s)
    yield first, systems
    for s in states:
        systems.advance(s)
        yield s, systems


def by_key(samples) -> dict[tuple, float]:
    return {(s.metric.name, s.labels): s.value for s in samples}


def at(scenario, times: tuple[float, ...], answer):
    """``answer(systems)`` at each of the simulated ``times`` (and the state's storage sums there)."""
    out = {}
    for s, systems in run(scenario):
        if s.t in times:
            out[s.t] = (answer(systems), {k: int(v.sum()) for k, v in s.storage.items()})
    return out


def test_each_checkpoint_lands_whole_in_the_minio_bucket_and_nothing_is_read_back():
    seen = at(exact("checkpoint"), (95.0, 135.0, 235.0), lambda sy: by_key(minio.read("ckpt", sim.minio_answer(sy))))
    key = ("ckpt", "bucket", sim.BUCKET)
    write, used, read = (m.WRITE_BYTES.name, key), (m.USED.name, key), (m.READ_BYTES.name, key)
    puts, objects = (m.OPERATIONS.name, (*key, "putobject")), (m.OBJECTS.name, key)
    for before, after in ((95.0, 135.0), (135.0, 235.0)):
        (a, sa), (b, sb) = seen[before], seen[after]
        wrote = sb["lustre_ckpt_bytes"] - sa["lustre_ckpt_bytes"]
        assert b[write] - a[write] == wrote == pytest.approx(CHECKPOINT_BYTES, abs=100)
        assert b[used] - a[used] == b[write] - a[write]
        assert b[puts] - a[puts] == pytest.approx(CHECKPOINT_BYTES / sim.OBJECT_BYTES, abs=1)
        assert b[objects] - a[objects] == pytest.approx(CHECKPOINT_BYTES / sim.OBJECT_BYTES, abs=1)
        assert b[read] == a[read] == sim.MINIO_SENT_BASE
    assert seen[95.0][0][write] == sim.MINIO_RECEIVED_BASE + seen[95.0][1]["lustre_ckpt_bytes"]


def test_vast_serves_the_dataset_reads_and_the_other_writes_summed_over_its_cnodes():
    scenario = exact("checkpoint")
    seen = at(scenario, (90.0, 95.0, 125.0), lambda sy: by_key(vast.read("v", sim.vast_answer(sy))))
    key = ("v", "cluster", sim.VAST_CLUSTER)
    for _, (samples, sums) in seen.items():
        assert samples[(m.READ_BYTES.name, key)] == sim.VAST_READ_BASE + sums["lustre_read_bytes"]
        assert samples[(m.WRITE_BYTES.name, key)] == \
            sim.VAST_WRITE_BASE + sums["lustre_write_bytes"] - sums["lustre_ckpt_bytes"]
        assert samples[(m.OPERATIONS.name, (*key, "read"))] == samples[(m.READ_BYTES.name, key)] // sim.VAST.read_io
        assert samples[(m.USED.name, key)] < samples[(m.CAPACITY.name, key)] == sim.VAST_LOGICAL_SPACE
    (a, _), (b, _), (c, _) = seen[90.0], seen[95.0], seen[125.0]
    # between checkpoints the job reads its dataset, one step's worth of bytes a step; while it checkpoints it reads none
    assert b[(m.READ_BYTES.name, key)] - a[(m.READ_BYTES.name, key)] == \
        pytest.approx(scenario.sample_period_s / scenario.job.step_time_s * scenario.job.storage_read_bytes_per_step, rel=0.01)
    assert c[(m.READ_BYTES.name, key)] - b[(m.READ_BYTES.name, key)] < b[(m.READ_BYTES.name, key)] - a[(m.READ_BYTES.name, key)]
    # the mean latency of the reads of a busy interval is above VAST's unloaded latency
    ops = b[(m.OPERATIONS.name, (*key, "read"))] - a[(m.OPERATIONS.name, (*key, "read"))]
    seconds = b[(m.LATENCY.name, (*key, "read"))] - a[(m.LATENCY.name, (*key, "read"))]
    assert seconds / ops > sim.VAST.read_latency_us * 1e-6


def test_vasts_views_split_its_traffic_the_dataset_reads_on_datasets_and_the_logs_on_logs():
    scenario = exact("checkpoint")
    seen = at(scenario, (90.0, 95.0, 125.0), lambda sy: (by_key(vast.read("v", sim.vast_answer(sy))),
                                                         by_key(vast.read_views("v", sim.vast_views_answer(sy)))))
    cluster, datasets, logs = ("v", "cluster", sim.VAST_CLUSTER), ("v", "view", "/datasets"), ("v", "view", "/logs")
    for _, ((_, views), sums) in seen.items():
        assert {labels[2] for _, labels in views} == {"/datasets", "/logs"}
        assert views[(m.READ_BYTES.name, datasets)] == sim.VIEW_READ_BASE["/datasets"] + sums["lustre_read_bytes"]
        assert views[(m.WRITE_BYTES.name, datasets)] == sim.VIEW_WRITE_BASE["/datasets"]      # the dataset is only read
        assert views[(m.WRITE_BYTES.name, logs)] == \
            sim.VIEW_WRITE_BASE["/logs"] + sums["lustre_write_bytes"] - sums["lustre_ckpt_bytes"]
        assert views[(m.READ_BYTES.name, logs)] == sim.VIEW_READ_BASE["/logs"]
        assert views[(m.USED.name, logs)] - sim.VIEW_HELD_BASE["/logs"] == \
            views[(m.WRITE_BYTES.name, logs)] - sim.VIEW_WRITE_BASE["/logs"]
        assert views[(m.USED.name, datasets)] == sim.VIEW_HELD_BASE["/datasets"]
    ((a, va), _), ((b, vb), _) = seen[90.0], seen[95.0]
    # what the cluster served between two ticks, its views served: the reads on /datasets, the writes on /logs
    for metric, view in ((m.READ_BYTES, datasets), (m.WRITE_BYTES, logs)):
        assert vb[(metric.name, view)] - va[(metric.name, view)] == b[(metric.name, cluster)] - a[(metric.name, cluster)] > 0
    ops = vb[(m.OPERATIONS.name, (*datasets, "read"))] - va[(m.OPERATIONS.name, (*datasets, "read"))]
    assert ops == pytest.approx(b[(m.OPERATIONS.name, (*cluster, "read"))] - a[(m.OPERATIONS.name, (*cluster, "read"))],
                                abs=1)
    # a view's reads wait as long as the cluster's: the latency follows the system's load, not the view's
    mean = (vb[(m.LATENCY.name, (*datasets, "read"))] - va[(m.LATENCY.name, (*datasets, "read"))]) / ops
    cluster_ops = b[(m.OPERATIONS.name, (*cluster, "read"))] - a[(m.OPERATIONS.name, (*cluster, "read"))]
    assert mean == pytest.approx((b[(m.LATENCY.name, (*cluster, "read"))] - a[(m.LATENCY.name, (*cluster, "read"))])
                                 / cluster_ops, rel=1e-3)
    assert mean > sim.VAST.read_latency_us * 1e-6


def test_weka_minutes_integrate_to_the_checkpoints_written_and_its_file_system_grows_by_them():
    counts, capacity, ckpt = weka.Counts(), {}, {}
    for s, systems in run(exact("checkpoint")):     # the exporter polling after every tick
        counts.add(weka.parse_stats(sim.weka_stats_answer(systems, list(weka.STATS), 5)))
        if s.t in (60.0, 240.0):
            capacity[s.t] = by_key(weka.parse_capacity("w", sim.weka_capacity_answer(systems)))
            ckpt[s.t] = int(s.storage["lustre_ckpt_bytes"].sum())
    totals = by_key(counts.samples("weka-sim"))
    key = ("weka-sim", "cluster", "weka-sim")
    # both checkpoints, in the minutes counted from the first whole minute (0-60 s, before them) on
    assert totals[(m.WRITE_BYTES.name, key)] == pytest.approx(2 * CHECKPOINT_BYTES, rel=1e-6)
    assert totals[(m.READ_BYTES.name, key)] == 0
    ops = totals[(m.OPERATIONS.name, (*key, "write"))]
    assert ops == pytest.approx(2 * CHECKPOINT_BYTES / sim.WEKA.write_io, rel=1e-6)
    # a checkpoint drives WEKA at 2 TB / 30 s: its writes wait longer than unloaded ones
    mean = totals[(m.LATENCY.name, (*key, "write"))] / ops
    assert mean == pytest.approx(sim.latency_us(sim.WEKA.write_latency_us, CHECKPOINT_BYTES / 30, sim.WEKA.bandwidth) * 1e-6)
    assert mean > sim.WEKA.write_latency_us * 1e-6
    fs = ("w", "filesystem", "checkpoints")
    grown = capacity[240.0][(m.USED.name, fs)] - capacity[60.0][(m.USED.name, fs)]
    assert grown == ckpt[240.0] - ckpt[60.0] == pytest.approx(2 * CHECKPOINT_BYTES, abs=100)
    assert capacity[240.0][(m.CAPACITY.name, fs)] == sim.WEKA_SIZES["checkpoints"]


def test_weka_per_node_each_job_nodes_frontend_writes_its_share_and_the_hosts_sum_to_the_cluster():
    counts, hosts, ends = weka.Counts(), weka.HostCounts(), {}
    for s, systems in run(exact("checkpoint")):     # the exporter polling after every tick, per_host: true
        counts.add(weka.parse_stats(sim.weka_stats_answer(systems, list(weka.STATS), 5)))
        answer = sim.weka_node_stats_answer(systems, list(weka.STATS), 5, no_zeroes=True)
        nodes = weka.parse_nodes(sim.weka_nodes_answer(systems))
        assert set(answer) <= nodes.known
        hosts.add(weka.parse_node_stats(answer), nodes.frontend)
        ends[s.t] = [int(v) for v in s.storage["lustre_ckpt_bytes"]]
    roles = weka.parse_hosts(sim.weka_hosts_answer(systems))
    assert roles == {"weka-backend-1": "server", "weka-backend-2": "server",
                     **{name: "client" for name in systems.node_names}}
    assert set(nodes.frontend.values()) == set(systems.node_names) == {"node00", "node01", "node02", "node03"}
    cluster = by_key(counts.samples("w"))
    per_host = by_key(hosts.samples("w", roles))
    last = ends[max(ends)]
    job = [name for name, ckpt in zip(systems.node_names, last) if ckpt > 0]
    assert job == list(systems.node_names)        # the scenario's job runs on all four nodes
    for name, ckpt in zip(systems.node_names, last):
        # each node's share of both checkpoints (the first per-node answer with traffic: minute 60-120 s, the
        # first checkpoint's first 20 s, is its newest: nothing before it is lost)
        assert per_host[(m.WRITE_BYTES.name, ("w", "host", name))] == pytest.approx(ckpt, rel=1e-6)
        assert per_host[(m.WRITE_BYTES.name, ("w", "host", name))] == pytest.approx(2 * CHECKPOINT_BYTES / len(job),
                                                                                  rel=1e-6)
        assert per_host[(m.HOST_INFO.name, ("w", name, "client"))] == 1.0
        assert (m.READ_BYTES.name, ("w", "host", name)) not in per_host   # nothing read: no_zeroes leaves it out
    key = ("w", "cluster", "w")
    for metric, op in ((m.WRITE_BYTES, ""), (m.OPERATIONS, "write"), (m.LATENCY, "write")):
        hosts_sum = sum(v for (name, labels), v in per_host.items()
                        if name == metric.name and labels[1] == "host" and (not op or labels[3] == op))
        expected = cluster[(metric.name, (*key, op) if op else key)]
        # operations: each node's whole MiB floored apart (a few per node); latency: the cluster's mean, per operation
        assert hosts_sum == pytest.approx(expected, rel=1e-3 if metric is not m.WRITE_BYTES else 1e-6)
    assert not any(labels[2].startswith("weka-backend") for _, labels in per_host)   # no frontend I/O of theirs


def test_the_weka_per_node_answer_without_no_zeroes_shows_every_client_node_and_node_ids_limit_it():
    systems = next(sy for s, sy in run(exact("checkpoint")) if s.t == 180.0)
    every = sim.weka_node_stats_answer(systems, ["WRITES", "READS"], 2, no_zeroes=False)
    assert set(every) == {sim.weka_client_node_id(i) for i in range(4)}
    assert all(len(node["ops"]) == 2 and node["ops"][0]["stats"]["READS"] == 0 for node in every.values())
    one = sim.weka_node_stats_answer(systems, ["WRITES"], 2, node_ids={"NodeId<101>"})
    assert set(one) == {"NodeId<101>"} and all(item["stats"].keys() == {"WRITES"} for item in one["NodeId<101>"]["ops"])


def test_every_counter_only_grows_and_weka_answers_whole_minutes_only():
    scenario = load_scenario(SHIPPED / "checkpoint.yaml")        # with the shipped noise
    counters = (m.READ_BYTES, m.WRITE_BYTES, m.OPERATIONS, m.LATENCY)
    last: dict[tuple, float] = {}
    for s, systems in run(scenario):
        samples = minio.read("a", sim.minio_answer(systems)) + vast.read("b", sim.vast_answer(systems)) \
            + vast.read_views("b", sim.vast_views_answer(systems))
        for sample in samples:
            if sample.metric in counters:
                key = (sample.metric.name, sample.labels)
                assert sample.value >= last.get(key, 0.0), (s.t, key)
                last[key] = sample.value
        items = sim.weka_stats_answer(systems, ["WRITES"], 5)["all"]["ops"]
        assert len(items) == min(5, int(s.timestamp // 60) - int(scenario.start_timestamp // 60))
        assert all(item["stats"].keys() == {"WRITES"} for item in items)


def test_latency_rises_with_load():
    loads = [0.0, 10e9, 50e9, 90e9, 200e9]
    values = [sim.latency_us(500.0, load, 100e9) for load in loads]
    assert values[0] == 500.0 and values == sorted(values) and values[-1] == values[-2] == pytest.approx(5000.0)


# Over HTTP: the systems on the simulator's app (with Redfish), the exporter's config and password files.

@pytest.fixture
async def served(aiohttp_server, tmp_path):
    scenario = exact("checkpoint")
    states = Model(scenario).states(scenario.ticks)
    first = next(states)
    systems, access = sim.Systems(first, scenario.sample_period_s), storagesys_app.Access()
    app = redfish.create_app(Model(scenario).topo, lambda: redfish.snapshot_of(first))
    storagesys_app.add_routes(app, systems, access)
    server = await aiohttp_server(app)
    url = f"http://127.0.0.1:{server.port}"
    storagesys_app.write_credentials(tmp_path, access)
    (tmp_path / storagesys_app.CONFIG).write_text(yaml.safe_dump(storagesys_app.exporter_config(url, 5.0)))
    return url, states, systems, access


def test_the_config_names_three_targets_at_one_address_with_private_password_files(tmp_path):
    access = storagesys_app.Access()
    storagesys_app.write_credentials(tmp_path, access)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(storagesys_app.exporter_config("http://127.0.0.1:9848", 5.0)))
    config = load_config(tmp_path / "c.yaml")
    assert {(t.name, t.kind, t.url) for t in config.targets} == {
        ("minio-ckpt", "minio", "http://127.0.0.1:9848"), ("vast-sim", "vast", "http://127.0.0.1:9848"),
        ("weka-sim", "weka", "http://127.0.0.1:9848")}
    assert config.target("vast-sim").basic_auth.password == access.vast_password
    assert config.target("vast-sim").views and not config.target("weka-sim").views
    assert config.target("weka-sim").per_host and not config.target("vast-sim").per_host
    assert config.target("weka-sim").per_filesystem and not config.target("vast-sim").per_filesystem
    assert config.target("weka-sim").basic_auth.password == access.weka_password
    assert config.interval_s == 5.0 and config.timeout_s == 4.0
    for name in ("storage-vast.password", "storage-weka.password"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


async def test_each_system_authenticates_as_its_own_does(served):
    url, _, _, access = served
    async with aiohttp.ClientSession() as session:
        await _authenticates(session, url, access)


async def _authenticates(session, url, access):
    async with session.get(url + sim.MINIO_PATH) as resp:
        assert resp.status == 200 and "minio_bucket_traffic_received_bytes" in await resp.text()
    right = {"Authorization": basic_auth("lockstep-ro", access.vast_password)}
    for path, family in ((sim.VAST_PATH, "vast_cnode_metrics_ProtoMetrics_read_size_sum"),
                         (sim.VAST_VIEWS_PATH, "vast_view_metrics_ViewMetrics_read_bw_sum")):
        for header in (None, basic_auth("lockstep-ro", "wrong"), basic_auth("admin", access.vast_password)):
            async with session.get(url + path, headers={"Authorization": header} if header else {}) as resp:
                assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Basic")
        async with session.get(url + path, headers=right) as resp:
            assert resp.status == 200 and family in await resp.text()

    async def rpc(method, params, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with session.post(url + sim.WEKA_PATH, json={"jsonrpc": "2.0", "method": method, "params": params, "id": 1},
                                headers=headers) as resp:
            return resp.status, (await resp.json() if resp.status == 200 else None)

    assert (await rpc("filesystems_get_capacity", {}))[0] == 401
    assert (await rpc("userlogin", {"username": "lockstep-ro", "password": "wrong"}))[1]["result"] == {}
    _, login = await rpc("userlogin", {"username": "lockstep-ro", "password": access.weka_password})
    tokens = login["result"]
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 300
    status, answer = await rpc("filesystems_get_capacity", {}, tokens["access_token"])
    assert status == 200 and {fs["name"] for fs in answer["result"].values()} == {"default", "checkpoints"}
    _, renewed = await rpc("user_refresh_token", {"refresh_token": tokens["refresh_token"]})
    assert (await rpc("stats_show", weka.stats_params(), renewed["result"]["access_token"]))[0] == 200
    for method, params in (("stats_show", weka.node_stats_params()), ("nodes_list", {}), ("hosts_list", {})):
        assert (await rpc(method, params))[0] == 401
        status, answer = await rpc(method, params, renewed["result"]["access_token"])
        assert status == 200 and "result" in answer, method
    _, nodes = await rpc("nodes_list", {}, renewed["result"]["access_token"])
    assert nodes["result"]["NodeId<100>"] == {"hostname": "node00", "roles": ["FRONTEND"]}
    _, bad = await rpc("stats_show", {**weka.node_stats_params(), "node_ids": "all"}, renewed["result"]["access_token"])
    assert bad["error"]["code"] == -32602
    _, per_fs = await rpc("stats_show", weka.fs_stats_params("WRITE_BYTES"), renewed["result"]["access_token"])
    assert set(per_fs["result"]["all"]) == {"fs_stats"}
    _, bad = await rpc("stats_show", {**weka.fs_stats_params("WRITE_BYTES"), "param": {}},
                       renewed["result"]["access_token"])
    assert bad["error"]["code"] == -32602
    assert "error" in (await rpc("user_refresh_token", {"refresh_token": "not-issued"}))[1]


async def test_the_exporter_reads_all_three_through_the_written_config(served, aiohttp_client, tmp_path):
    url, states, systems, access = served
    config = load_config(tmp_path / storagesys_app.CONFIG)
    client = await aiohttp_client(create_app(config, background=False))

    async def scrape() -> dict[tuple, float]:
        await client.app[POLLER].poll_all()
        text = await (await client.get("/metrics")).text()
        assert access.vast_password not in text and access.weka_password not in text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    def total(samples, metric, target):
        return sum(v for (name, labels), v in samples.items() if name == metric.name and ("target", target) in labels)

    for s in states:            # to 135 s: the first checkpoint written, WEKA's minutes to 120 s whole
        systems.advance(s)
        if s.t == 60.0:
            first = await scrape()
        if s.t == 135.0:
            break
    second = await scrape()
    for target in storagesys_app.TARGETS:
        assert second[(m.UP.name, (("target", target),))] == 1.0
    assert total(second, m.READ_BYTES, "vast-sim") > total(first, m.READ_BYTES, "vast-sim")
    assert total(second, m.WRITE_BYTES, "vast-sim") > total(first, m.WRITE_BYTES, "vast-sim")
    # and per view (views: true in the written config): the reads grew on /datasets as on the cluster
    cluster, datasets = (("name", "vast-sim"), ("scope", "cluster")), (("name", "/datasets"), ("scope", "view"))
    key = {where: (m.READ_BYTES.name, (*where, ("target", "vast-sim"))) for where in (cluster, datasets)}
    assert second[key[datasets]] - first[key[datasets]] == second[key[cluster]] - first[key[cluster]] > 0
    assert second[(m.WRITE_BYTES.name, (("name", "/logs"), ("scope", "view"), ("target", "vast-sim")))] > 0
    assert (m.POLL_FAILURES.name, (("reason", "http"), ("target", "vast-sim"))) not in second
    assert total(second, m.WRITE_BYTES, "minio-ckpt") - total(first, m.WRITE_BYTES, "minio-ckpt") == \
        pytest.approx(CHECKPOINT_BYTES, abs=100)
    # WEKA counted minute 0-60 s first, then 60-120 s: the checkpoint's first 20 s
    weka_cluster = (m.WRITE_BYTES.name, (("name", "weka-sim"), ("scope", "cluster"), ("target", "weka-sim")))
    assert second[weka_cluster] - first[weka_cluster] == pytest.approx(CHECKPOINT_BYTES * 20 / 30, rel=1e-6)
    # and per host (per_host: true in the written config): no host wrote in minute 0-60 s (no_zeroes: no series
    # yet); then each of the four nodes its quarter of those 20 s, a client
    assert not [labels for (_, labels) in first if ("scope", "host") in labels]
    for name in ("node00", "node01", "node02", "node03"):
        host = (m.WRITE_BYTES.name, (("name", name), ("scope", "host"), ("target", "weka-sim")))
        assert second[host] == pytest.approx(CHECKPOINT_BYTES * 20 / 30 / 4, rel=1e-6)
        assert second[(m.HOST_INFO.name, (("name", name), ("role", "client"), ("target", "weka-sim")))] == 1.0
    assert (m.POLL_FAILURES.name, (("reason", "parse"), ("target", "weka-sim"))) not in second


def test_weka_per_file_system_all_of_the_clusters_io_is_the_checkpoints_file_systems():
    counts, per_fs = weka.Counts(), weka.HostCounts()
    for _, systems in run(exact("checkpoint")):     # the exporter polling after every tick, per_filesystem: true
        counts.add(weka.parse_stats(sim.weka_stats_answer(systems, list(weka.STATS), 5)))
        answers = {stat: sim.weka_fs_stats_answer(systems, stat, 5) for stat in weka.STATS}
        per_fs.add(weka.parse_fs_stats(answers, per_fs.floor()),
                   weka.filesystem_names(sim.weka_capacity_answer(systems)))
    cluster = by_key(counts.samples("w"))
    got = by_key(per_fs.samples("w", {}, weka.FILESYSTEM_SCOPE))
    key, ckpt, idle = ("w", "cluster", "w"), ("w", "filesystem", "checkpoints"), ("w", "filesystem", "default")
    assert cluster[(m.WRITE_BYTES.name, key)] == pytest.approx(2 * CHECKPOINT_BYTES, rel=1e-6)
    for metric, op in ((m.WRITE_BYTES, ""), (m.READ_BYTES, ""), (m.OPERATIONS, "write"), (m.LATENCY, "write")):
        assert got[(metric.name, (*ckpt, op) if op else ckpt)] == pytest.approx(
            cluster[(metric.name, (*key, op) if op else key)], rel=1e-9)
        if metric is not m.LATENCY:
            assert got[(metric.name, (*idle, op) if op else idle)] == 0   # idle: zero, its latency null
    assert (m.LATENCY.name, (*idle, "write")) not in got
    # one file system asked for: that one's stats alone
    one = sim.weka_fs_stats_answer(systems, "WRITE_BYTES", 2, fs_id="1")
    assert {key for item in one["all"]["fs_stats"] for key in item["stats"]} == {"WRITE_BYTES[fS: 1]"}
