"""Regression tests for bugs found reviewing the node agent (exporters/): each names what went wrong."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pynvml

from exporters.gpu import xid


class FlakyEvents:
    """pynvml's event-set calls; the first wait fails with a non-NVML error, as the simulator backend
    does on an ``xid_events`` entry without ``seq``; then one XID 79 arrives."""

    def __init__(self) -> None:
        self.waits = 0

    def nvmlEventSetCreate(self):
        return SimpleNamespace()

    def nvmlDeviceRegisterEvents(self, handle, event_types, event_set) -> None:
        pass

    def nvmlEventSetFree(self, event_set) -> None:
        pass

    def nvmlEventSetWait(self, event_set, timeout_ms):
        self.waits += 1
        if self.waits == 1:
            raise KeyError("seq")
        if self.waits == 2:
            return SimpleNamespace(device=HANDLE, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
        time.sleep(0.01)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)


HANDLE = SimpleNamespace(index=0)


def test_xid_watcher_survives_a_non_nvml_error(monkeypatch):
    """Before: any exception but NVMLError ended the watcher thread silently, and XIDs were never counted again."""
    monkeypatch.setattr(xid, "RETRY_S", 0.01)
    watcher = xid.XidWatcher(FlakyEvents(), [HANDLE])
    try:
        deadline = time.monotonic() + 5
        while not watcher.counts() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.counts() == {(0, 79): 1}
        assert watcher.alive()
    finally:
        watcher.close()
    assert not watcher.alive()


async def test_bcrypt_check_runs_off_the_event_loop(aiohttp_client, monkeypatch):
    """Before: bcrypt.checkpw ran in the event loop, so every wrong password (never cached) stalled every
    scrape for ~0.25 s. Now it runs in a worker thread; the answers are unchanged."""
    import threading
    from base64 import b64encode

    import bcrypt
    from aiohttp import web

    from exporters import web as lweb
    from exporters.webconfig import WebConfig

    checked_in: list[threading.Thread] = []
    real_checkpw = bcrypt.checkpw

    def checkpw(password: bytes, hashed: bytes) -> bool:
        checked_in.append(threading.current_thread())
        return real_checkpw(password, hashed)

    monkeypatch.setattr(lweb.bcrypt, "checkpw", checkpw)
    config = WebConfig("web.yml", basic_auth_users={"prom": bcrypt.hashpw(b"secret", bcrypt.gensalt(4))})
    app = web.Application(middlewares=[lweb.auth_middleware(config)])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/metrics", ok)
    client = await aiohttp_client(app)

    def auth(password: str) -> dict:
        return {"Authorization": "Basic " + b64encode(f"prom:{password}".encode()).decode()}

    assert (await client.get("/metrics", headers=auth("wrong"))).status == 401
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200  # cached: no third check
    assert len(checked_in) == 2
    assert threading.main_thread() not in checked_in


def test_nfs_mount_point_with_a_space_matches_the_mount_table():
    """Before: mountstats' octal escapes (``\\040`` for a space, as in /proc/self/mounts) reached the
    ``mount`` label, so an NFS mount point with a space differed from the same path everywhere else."""
    from exporters.storage.mounts import parse_mounts
    from exporters.storage.mountstats import parse_mountstats

    text = ("device 10.0.0.20:/export/my\\040home mounted on /mnt/my\\040home with fstype nfs4 statvers=1.1\n"
            "\tbytes:\t1 2 3 4 5 6 7 8\n")
    (mount,) = parse_mountstats(text)
    assert (mount.device, mount.mountpoint, mount.normal_read_bytes) == ("10.0.0.20:/export/my home", "/mnt/my home", 1)
    table = parse_mounts("10.0.0.20:/export/my\\040home /mnt/my\\040home nfs4 rw 0 0\n")
    assert table[0].mountpoint == mount.mountpoint
