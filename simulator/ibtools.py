"""Simulated ``ibnetdiscover`` and ``perfquery`` over the fabric of ``ibfabric``, printing exactly what
infiniband-diags prints (the recorded outputs in tests/fixtures/infiniband-diags/ are the reference):

    python -m lockstep.simulator.ibtools SPEC.json ibnetdiscover -p
    python -m lockstep.simulator.ibtools SPEC.json perfquery -l -x -G GUID PORT[,PORT...]

SPEC.json: ``{"nodes": 128, "rails": 8, "spines": 16, "start_timestamp": UNIX, "speed": 1.0, "faults": [...],
"unreachable": ["ib-leaf-r3-1"]}``; simulated time is ``(now - start_timestamp) × speed``. A switch in
``unreachable`` never answers (its perfquery hangs until killed, as on a wedged switch).

Each call above starts Python and builds the fabric again, and a sweep of a 128-node fabric makes a call per
switch and HCA. ``ToolServer`` answers the same calls for a whole run from one process: the tool commands it
gives run ``ibtools_client.sh`` (bash, then cat), which hands its arguments to the server over loopback TCP and
prints the answer, or waits until killed where the tool would hang.
"""
from __future__ import annotations

import json
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from lockstep.simulator import ibfabric
from lockstep.simulator.ibfabric import Fabric, Node

KIND = {"switch": "SW", "ca": "CA"}
# The fields of one PortCountersExtended block in perfquery's order (a ConnectX port that sets
# IsAdditionalPortCountersExtendedSupported, as the recorded outputs do), with the value format of each.
FIELDS = ("PortSelect", "CounterSelect", "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts",
          "PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts",
          "CounterSelect2", "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
          "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
          "PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped",
          "PortXmitWait", "QP1Dropped")
HEX = {"CounterSelect": 4, "CounterSelect2": 8}
CAPMASK = {"switch": "CapMask: 0x5300 CapMask2: 0x0000002", "ca": "CapMask: 0x5A00 CapMask2: 0x0000000"}


def port_line(local: Node, port: int, remote: Node, remote_port: int, width: int, speed: str) -> str:
    """One linked port as ``ibnetdiscover -p`` prints it."""
    return (f"{KIND[local.kind]} {local.lid:>5} {port:>2} {local.guid} {width}x {speed} - "
            f"{KIND[remote.kind]} {remote.lid:>5} {remote_port:>2} {remote.guid} ( '{local.name}' - '{remote.name}' )")


def counter_block(lid: int, port: int, capmask: str, values: Mapping[str, int]) -> str:
    """One ``# Port extended counters`` block of ``perfquery -x``; ``values`` in octets for the data counters
    (printed as the 4-octet words the hardware counts), absent fields 0."""
    lines = [f"# Port extended counters: Lid {lid} port {port} ({capmask})"]
    for name in FIELDS:
        value = port if name == "PortSelect" else values.get(name, 0)
        if name in ("PortXmitData", "PortRcvData"):
            value //= 4
        text = f"0x{value:0{HEX[name]}x}" if name in HEX else str(value)
        lines.append(f"{name}:".ljust(33, ".") + text)
    return "\n".join(lines) + "\n"


def ibnetdiscover(fabric: Fabric) -> str:
    ports = fabric.ports()
    lines = [port_line(node, port, remote, remote_port, ibfabric.WIDTH, ibfabric.SPEED)
             for (_, port), (node, remote, remote_port) in sorted(ports.items(), key=lambda kv: (kv[1][0].lid, kv[0][1]))]
    return "\n".join(lines) + "\n"


def perfquery(spec: Mapping[str, Any], fabric: Fabric, guid: str, ports: Iterable[int], t: float) -> str:
    table = fabric.ports()
    blocks = []
    for port in ports:
        node, remote, remote_port = table[(guid, port)]
        values = {**{f: 0 for f in FIELDS}, **ibfabric.counters(spec, guid, port, remote.guid, remote_port, t)}
        values["PortUnicastXmitPkts"], values["PortUnicastRcvPkts"] = values["PortXmitPkts"], values["PortRcvPkts"]
        blocks.append(counter_block(node.lid, port, CAPMASK[node.kind], values))
    return output(blocks)


def output(blocks: Iterable[str]) -> str:
    """perfquery's whole output: its blocks, then one blank line."""
    return "".join(blocks) + "\n"


def sim_time(spec: Mapping[str, Any], now: float | None = None) -> float:
    return ((time.time() if now is None else now) - float(spec["start_timestamp"])) * float(spec.get("speed", 1.0))


def answer(spec: Mapping[str, Any], fabric: Fabric, tool: str, args: list[str]) -> str | None:
    """What ``tool args`` prints now; None where it never answers (an unreachable switch)."""
    if tool == "ibnetdiscover":
        return ibnetdiscover(fabric)
    guid = f"0x{int(args[args.index('-G') + 1], 16):016x}"
    if any(n.guid == guid and n.name in spec.get("unreachable", ()) for n in fabric.nodes):
        return None
    return perfquery(spec, fabric, guid, [int(p) for p in args[-1].split(",")], sim_time(spec))


CLIENT = Path(__file__).with_name("ibtools_client.sh")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    # A sweep's workers connect at once, and the accepting thread may wait for the GIL behind the answering
    # ones: socketserver's default backlog of 5 would drop connections, whose retries (1 s, then 3 s) can
    # outlast the exporter's per-node deadline.
    request_queue_size = 128


class ToolServer:
    """The tools of SPEC.json answered from this process on 127.0.0.1 (a daemon thread per call) until
    ``close()``; ``command(tool)`` is the command line to give the fabric exporter."""

    def __init__(self, spec_path: Path) -> None:
        spec = json.loads(Path(spec_path).read_text())
        fabric = ibfabric.from_spec(spec)

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                tool, *args = self.rfile.readline().decode().split()
                text = answer(spec, fabric, tool, args)
                if text is None:
                    self.rfile.read()   # unanswered until the client is killed and its end closes
                    return
                self.wfile.write(text.encode())

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, name="ibtools", daemon=True).start()

    def command(self, tool: str) -> str:
        return f"bash {CLIENT} {self.server.server_address[1]} {tool}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    text = answer(spec, ibfabric.from_spec(spec), argv[1], argv[2:])
    if text is None:
        threading.Event().wait()   # the MAD goes unanswered; the caller's deadline kills it
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
