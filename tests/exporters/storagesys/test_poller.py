"""The storage exporter against fake storage systems serving MinIO's recorded answer over HTTP (in
process): each target's metrics arrive; a dead, a hung and a garbage-answering target each read as down
with their reason and leave the others intact; the bearer token is sent and never logged."""
from __future__ import annotations

import logging

import pytest

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.storagesys.app import create_app
from lockstep.exporters.storagesys.config import StorageConfig, Target
from lockstep.exporters.toolkit.credentials import Credentials
from tests.helpers.storagefake import CEPH_RGW, MINIO_BUCKET, VAST, Behaviour, FakeStorage, two_servers
from tests.helpers.storagescrape import scrape, value

TOKEN = "eyJhbGciOi-never-logged-Sig"


@pytest.fixture
async def fake(aiohttp_server):
    storage = FakeStorage()
    storage.add("good", Behaviour(token=TOKEN))
    storage.add("other")
    storage.add("hung", Behaviour(mode="hang"))
    storage.add("garbage", Behaviour(mode="garbage"))
    storage.add("denied", Behaviour(token="another"))
    server = await aiohttp_server(storage.app())
    yield storage, f"http://127.0.0.1:{server.port}"
    storage.hung.set()


def config(base: str, refused_port: int, *names: str, timeout_s: float = 5.0) -> StorageConfig:
    targets = [Target(n, "minio", f"{base}/{n}", bearer_token=TOKEN if n in ("good", "denied") else None)
               for n in names]
    targets.append(Target("dead", "minio", f"http://127.0.0.1:{refused_port}"))
    return StorageConfig(tuple(targets), interval_s=60.0, timeout_s=timeout_s)


async def test_failing_targets_are_down_with_their_reason_and_the_others_intact(
        fake, refused_port, aiohttp_client, caplog):
    storage, base = fake
    caplog.set_level(logging.DEBUG)
    cfg = config(base, refused_port, "good", "other", "garbage", "denied")
    client = await aiohttp_client(create_app(cfg, background=False))
    await _poll(client)
    got = await scrape(client)
    for name in ("good", "other"):
        assert value(got, m.UP, target=name) == 1.0
        assert value(got, m.READ_BYTES, target=name, scope="bucket", name="mybucket") == 1232.0
        assert value(got, m.OPERATIONS, target=name, scope="bucket", name="mybucket", op="putobject") == 1.0
    for name, reason in (("dead", "connect"), ("garbage", "parse"), ("denied", "http")):
        assert value(got, m.UP, target=name) == 0.0
        assert value(got, m.POLL_FAILURES, target=name, reason=reason) == 1.0
        assert value(got, m.READ_BYTES, target=name, scope="bucket", name="mybucket") is None
    assert storage.requests["good"] == 1
    assert TOKEN not in caplog.text and "another" not in caplog.text
    logged = [r.fields for r in caplog.records if r.name == "lockstep.storage"]
    assert {f["target"]: f["reason"] for f in logged} == {"dead": "connect", "garbage": "parse", "denied": "http"}
    assert not any(TOKEN in str(f) or "another" in str(f) for f in logged)


async def test_an_error_of_the_exporters_own_reading_loses_that_poll_alone(fake, refused_port, aiohttp_client,
                                                                            monkeypatch, caplog):
    """A reader that raises what no poll error names (a bug): that target is down with reason internal, logged with
    its traceback, the others polled, and the next round polls again."""
    from lockstep.exporters.storagesys import poller

    _, base = fake
    path, parse = poller.KINDS["minio"]

    def broken(name: str, text: str):
        if name == "other":
            raise KeyError("a field the parser assumed")
        return parse(name, text)
    monkeypatch.setitem(poller.KINDS, "minio", (path, broken))
    client = await aiohttp_client(create_app(config(base, refused_port, "good", "other"), background=False))
    await _poll(client)
    await _poll(client)
    got = await scrape(client)
    assert value(got, m.UP, target="other") == 0.0
    assert value(got, m.POLL_FAILURES, target="other", reason="internal") == 2.0
    assert value(got, m.UP, target="good") == 1.0
    assert any(r.exc_info and r.name == "lockstep.storage" for r in caplog.records)


async def _poll(client):
    from lockstep.exporters.storagesys.app import POLLER
    await client.app[POLLER].poll_all()


@pytest.mark.slow  # waits out a real (short) timeout
async def test_a_hung_target_times_out_alone(fake, refused_port, aiohttp_client):
    _, base = fake
    cfg = config(base, refused_port, "hung", "good", timeout_s=2.0)
    client = await aiohttp_client(create_app(cfg, background=False))
    await _poll(client)
    got = await scrape(client)
    assert value(got, m.UP, target="hung") == 0.0
    assert value(got, m.POLL_FAILURES, target="hung", reason="timeout") == 1.0
    assert value(got, m.UP, target="good") == 1.0
    assert value(got, m.POLL_DURATION, target="good") < 2.0   # never waited on the hung one


async def test_not_polled_yet_is_unknown_not_down(fake, refused_port, aiohttp_client):
    _, base = fake
    client = await aiohttp_client(create_app(config(base, refused_port, "good"), background=False))
    got = await scrape(client)
    assert value(got, m.TARGET_INFO, target="good", kind="minio", address=f"{base}/good") == 1.0
    assert not any(k[0] == m.UP.name for k in got)


async def test_kinds_side_by_side_each_read_at_its_own_endpoint(aiohttp_server, aiohttp_client):
    storage = FakeStorage()
    storage.add("rgw", Behaviour(body=CEPH_RGW, kind="ceph-rgw"))
    storage.add("s3", Behaviour(body=MINIO_BUCKET))
    storage.add("rgw-minio-body", Behaviour(body=MINIO_BUCKET, kind="ceph-rgw"))  # a MinIO behind a ceph-rgw entry
    storage.add("rgw-garbage", Behaviour(mode="garbage", kind="ceph-rgw"))
    server = await aiohttp_server(storage.app())
    base = f"http://127.0.0.1:{server.port}"
    cfg = StorageConfig((Target("rgw", "ceph-rgw", f"{base}/rgw"), Target("s3", "minio", f"{base}/s3"),
                         Target("rgw-minio-body", "ceph-rgw", f"{base}/rgw-minio-body"),
                         Target("rgw-garbage", "ceph-rgw", f"{base}/rgw-garbage")), interval_s=60.0, timeout_s=5.0)
    client = await aiohttp_client(create_app(cfg, background=False))
    await _poll(client)
    got = await scrape(client)
    assert value(got, m.UP, target="rgw") == 1.0
    assert value(got, m.LATENCY, target="rgw", scope="bucket", name="bucket1", op="put_obj") == 2.818065
    assert value(got, m.ERRORS, target="rgw", scope="cluster", name="rgw", **{"class": "failed"}) == 7.0
    assert value(got, m.READ_BYTES, target="s3", scope="bucket", name="mybucket") == 1232.0
    for name in ("rgw-minio-body", "rgw-garbage"):
        assert value(got, m.UP, target=name) == 0.0
        assert value(got, m.POLL_FAILURES, target=name, reason="parse") == 1.0


async def test_vast_is_read_with_basic_auth_and_a_wrong_password_is_an_http_failure(aiohttp_server, aiohttp_client,
                                                                                   caplog):
    storage = FakeStorage()
    for name in ("vms", "vms-wrong"):
        storage.add(name, Behaviour(body=VAST, kind="vast", basic=("lockstep-ro", "s3cr3t-vms")))
    server = await aiohttp_server(storage.app())
    base = f"http://127.0.0.1:{server.port}"
    cfg = StorageConfig((Target("vms", "vast", f"{base}/vms", basic_auth=Credentials("lockstep-ro", "s3cr3t-vms")),
                         Target("vms-wrong", "vast", f"{base}/vms-wrong", basic_auth=Credentials("lockstep-ro", "nope"))),
                        interval_s=60.0, timeout_s=5.0)
    caplog.set_level(logging.DEBUG)
    client = await aiohttp_client(create_app(cfg, background=False))
    await _poll(client)
    got = await scrape(client)
    assert value(got, m.UP, target="vms") == 1.0
    assert value(got, m.READ_BYTES, target="vms", scope="cluster", name="vast-lab") == 14_500_000_000_000
    assert value(got, m.CAPACITY, target="vms", scope="cluster", name="vast-lab") == 2e15
    assert value(got, m.UP, target="vms-wrong") == 0.0
    assert value(got, m.POLL_FAILURES, target="vms-wrong", reason="http") == 1.0
    assert "s3cr3t-vms" not in caplog.text and "nope" not in caplog.text


def many_buckets(count: int) -> str:
    """The recorded answer's bucket series once per bucket of ``count`` (megabytes: many socket reads)."""
    lines = [line for line in MINIO_BUCKET.splitlines() if 'bucket="mybucket"' in line]
    return "".join(line.replace('bucket="mybucket"', f'bucket="b{i:04d}"') + "\n" for i in range(count) for line in lines)


async def test_an_answer_of_many_reads_is_read_to_its_end_and_one_past_the_bound_refused(aiohttp_server, aiohttp_client):
    body = many_buckets(500)
    assert len(body) > 4 * 256 * 1024   # longer than several of asyncio's 256 KiB socket reads
    storage = FakeStorage()
    storage.add("big", Behaviour(body=body))
    storage.add("too-big", Behaviour(body=body))
    server = await aiohttp_server(storage.app())
    base = f"http://127.0.0.1:{server.port}"
    cfg = StorageConfig((Target("big", "minio", f"{base}/big"), Target("too-big", "minio", f"{base}/too-big")),
                        interval_s=60.0, timeout_s=30.0, max_answer_bytes=len(body.encode()))
    cfg_small = StorageConfig(cfg.targets[1:], interval_s=60.0, timeout_s=30.0, max_answer_bytes=len(body.encode()) - 1)
    client = await aiohttp_client(create_app(cfg, background=False))
    await _poll(client)
    got = await scrape(client)
    assert value(got, m.UP, target="big") == 1.0
    read = {k[1] for k in got if k[0] == m.READ_BYTES.name and ("target", "big") in k[1]}
    assert len(read) == 500
    assert value(got, m.READ_BYTES, target="big", scope="bucket", name="b0499") == 1232.0
    small = await aiohttp_client(create_app(cfg_small, background=False))
    await _poll(small)
    got = await scrape(small)
    assert value(got, m.UP, target="too-big") == 0.0
    assert value(got, m.POLL_FAILURES, target="too-big", reason="parse") == 1.0


async def test_a_server_leaving_the_answer_never_makes_the_exported_sum_go_backwards(
        fake, refused_port, aiohttp_client):
    """Two MinIO servers in one answer (the recorded one and its copy, 1232 bytes sent each); the second leaves
    the answer for one poll and comes back having sent nothing more: the summed bytes sent stay 2464, never the
    drop to 1232 a plain sum gives, which rate() would read as a reset of the whole sum."""
    storage, base = fake
    client = await aiohttp_client(create_app(config(base, refused_port, "other"), background=False))
    got = []
    for body in (two_servers(MINIO_BUCKET), MINIO_BUCKET, two_servers(MINIO_BUCKET)):
        storage.targets["other"].body = body
        await _poll(client)
        got.append(value(await scrape(client), m.READ_BYTES, target="other", scope="bucket", name="mybucket"))
    assert got == [2464.0, 2464.0, 2464.0]
