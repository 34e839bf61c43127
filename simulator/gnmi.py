"""A fake switch's gNMI server: the real gNMI proto over real gRPC, serving recorded paths and values.

It answers a STREAM subscription the way the switches do: after the first sample a ``sync_response``,
then one notification per ``sample_interval`` holding every recorded update under the request's prefix
target. Recordings (tests/fixtures/gnmi/, provenance in its README) are JSON: ``prefix_target`` and
``updates``, each a ``path`` with a ``json_ietf`` or ``uint`` value. Restartable on the same port: ``stop()``
ends every stream as a switch going away does, ``start()`` listens again."""
from __future__ import annotations

import json
import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Iterator

import grpc

from lockstep.exporters.third_party.gnmi import gnmi_pb2, gnmi_pb2_grpc
from lockstep.exporters.toolkit.gnmipath import parse_path


@dataclass
class Recording:
    prefix_target: str
    updates: list[gnmi_pb2.Update]


def load_recording(doc: dict) -> Recording:
    updates = []
    for item in doc["updates"]:
        if "json_ietf" in item:
            val = gnmi_pb2.TypedValue(json_ietf_val=json.dumps(item["json_ietf"]).encode())
        else:
            val = gnmi_pb2.TypedValue(uint_val=int(item["uint"]))
        updates.append(gnmi_pb2.Update(path=parse_path(item["path"]), val=val))
    return Recording(doc.get("prefix_target", ""), updates)


class _Servicer(gnmi_pb2_grpc.gNMIServicer):
    def __init__(self, switch: "FakeSwitch") -> None:
        self.switch = switch

    def Subscribe(self, request_iterator: Iterator[gnmi_pb2.SubscribeRequest], context: grpc.ServicerContext):  # noqa: N802 (gNMI's name)
        switch = self.switch
        if switch.credentials is not None:
            metadata = dict(context.invocation_metadata())
            if (metadata.get("username"), metadata.get("password")) != switch.credentials:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")
        request = next(request_iterator)
        switch.subscribed.set()
        interval_s = max(min((s.sample_interval for s in request.subscribe.subscription), default=0) / 1e9, 0.01)
        stopping = switch.stopping
        first = True
        while context.is_active() and not stopping.is_set():
            yield gnmi_pb2.SubscribeResponse(update=switch.notification())
            if first:
                yield gnmi_pb2.SubscribeResponse(sync_response=True)
                first = False
            stopping.wait(interval_s)  # the switch's own sample interval


class FakeSwitch:
    """One gNMI server on 127.0.0.1; ``credentials``: the (username, password) it demands, or None."""

    def __init__(self, recording: Recording, port: int = 0, credentials: tuple[str, str] | None = None,
                 server_credentials: grpc.ServerCredentials | None = None) -> None:
        self.recording, self.port, self.credentials = recording, port, credentials
        self.server_credentials = server_credentials
        self.subscribed = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server: grpc.Server | None = None

    def notification(self) -> gnmi_pb2.Notification:
        with self._lock:
            prefix = gnmi_pb2.Path(target=self.recording.prefix_target) if self.recording.prefix_target else None
            return gnmi_pb2.Notification(timestamp=0, prefix=prefix, update=list(self.recording.updates))

    def replace(self, recording: Recording) -> None:
        with self._lock:
            self.recording = recording

    def start(self) -> "FakeSwitch":
        self.stopping = threading.Event()
        self.subscribed.clear()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        gnmi_pb2_grpc.add_gNMIServicer_to_server(_Servicer(self), server)
        address = f"127.0.0.1:{self.port}"
        self.port = (server.add_secure_port(address, self.server_credentials) if self.server_credentials
                     else server.add_insecure_port(address))
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.stopping.set()
            self._server.stop(grace=None).wait()
            self._server = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"
