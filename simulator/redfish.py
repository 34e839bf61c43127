"""The simulated Redfish service: every device under its own path prefix on one port.

Device ``node05`` has its service root at ``/node05/redfish/v1``; racks' PDUs are ``r1-pdu`` ...,
the CDU is ``cdu1``. Documents follow the model's latest tick (``PowerSnapshot``).
"""
from __future__ import annotations

from typing import Callable

from aiohttp import web

from lockstep.simulator import redfish_cdu
from lockstep.simulator import redfish_docs as docs
from lockstep.simulator.redfish_docs import PowerSnapshot
from lockstep.simulator.topology import Topology

SNAPSHOT = web.AppKey("snapshot", Callable[[], PowerSnapshot])
DEVICES = web.AppKey("devices", dict)


def devices(topo: Topology) -> dict[str, Callable[[PowerSnapshot], dict[str, dict]]]:
    """Prefix -> function building that device's documents from a snapshot."""
    out: dict[str, Callable[[PowerSnapshot], dict[str, dict]]] = {}
    for i, node in enumerate(topo.nodes):
        out[node] = (lambda n, i: lambda snap: docs.bmc(n, i, snap))(node, i)  # noqa: B023 (bound by the call)
    for r, rack in enumerate(topo.racks):
        members = [(n, i) for i, n in enumerate(topo.nodes) if topo.node_rack[i] == r]
        out[topo.pdu_name(rack)] = (lambda rk, r, m: lambda snap: docs.pdu(rk, r, m, snap))(rack, r, members)  # noqa: B023
    out[topo.cdu_name] = redfish_cdu.cdu
    return out


def kinds(topo: Topology) -> dict[str, tuple[str, str | None]]:
    """Prefix -> (power-exporter target kind, rack)."""
    out = {node: ("bmc", topo.rack_of(i)) for i, node in enumerate(topo.nodes)}
    out.update({topo.pdu_name(r): ("pdu", r) for r in topo.racks})
    out[topo.cdu_name] = ("cdu", None)
    return out


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"code": "Base.1.15.0.ResourceNotFound" if status == 404 else "Base.1.15.0.GeneralError",
                      "message": message}}
    return web.json_response(body, status=status)


async def handle(request: web.Request) -> web.Response:
    device = request.match_info["device"]
    build = request.app[DEVICES].get(device)
    if build is None:
        return _error(404, f"no simulated device {device!r}")
    path = "/redfish/v1" + request.match_info["tail"].rstrip("/")
    doc = build(request.app[SNAPSHOT]()).get(path)
    if doc is None:
        return _error(404, f"the resource at {path} was not found")
    return web.json_response(doc, headers={"OData-Version": "4.0"})


def create_app(topo: Topology, snapshot: Callable[[], PowerSnapshot]) -> web.Application:
    app = web.Application()
    app[SNAPSHOT] = snapshot
    app[DEVICES] = devices(topo)
    app.router.add_get(r"/{device}/redfish/v1{tail:(/.*)?}", handle)
    return app


def snapshot_of(state) -> PowerSnapshot:
    p = state.power
    return PowerSnapshot(state.timestamp, p["chassis_w"].copy(), p["chassis_j"].copy(), p["pdu_w"].copy(),
                         p["pdu_j"].copy(), dict(state.coolant))
