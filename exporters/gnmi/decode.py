"""gNMI notifications → samples of the switch catalog (pure: protobuf message in, samples out).

A SONiC update carries a COUNTERS_DB table as JSON (``json_ietf_val``) keyed by port or by ``port:queue``;
a Cumulus update carries one openconfig leaf as a scalar. An update neither can read is an error named in
``Decoded.errors`` and dropped; the rest of the notification still counts."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from lockstep.exporters.catalog import gnmi as m
from lockstep.exporters.third_party.gnmi import gnmi_pb2
from lockstep.exporters.toolkit.sample import Sample

_PFC_FRAMES = re.compile(r"SAI_PORT_STAT_PFC_([0-7])_(RX|TX)_PKTS")
_PFC_DURATION_US = re.compile(r"SAI_PORT_STAT_PFC_([0-7])_RX_PAUSE_DURATION_US")
_QUEUE_FIELDS = {"SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": (m.ECN_MARKED, ()),
                 "SAI_QUEUE_STAT_DROPPED_PACKETS": (m.DROPPED, ("any",)),
                 "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": (m.WATERMARK, ())}
_WATCHDOG_FIELDS = {"PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": (m.WATCHDOG_STORMS, ("detected",)),
                    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": (m.WATCHDOG_STORMS, ("restored",)),
                    "PFC_WD_QUEUE_STATS_RX_DROPPED_PACKETS": (m.WATCHDOG_DROPPED, ("rx",)),
                    "PFC_WD_QUEUE_STATS_TX_DROPPED_PACKETS": (m.WATCHDOG_DROPPED, ("tx",))}
_WATCHDOG_STATUS = {"operational": 0.0, "stormed": 1.0}  # sonic-swss orchagent/pfcactionhandler.cpp
_US = 1e-6  # both path sets count pause time in microseconds
_CUMULUS_PRIORITY = {"in-pause-pkts": (m.PAUSE_FRAMES, "rx", 1.0), "out-pause-pkts": (m.PAUSE_FRAMES, "tx", 1.0),
                     "in-pause-duration": (m.PAUSE_DURATION, "rx", _US),
                     "out-pause-duration": (m.PAUSE_DURATION, "tx", _US)}
_CUMULUS_QUEUE = {"ecn-marked-pkts": (m.ECN_MARKED, ()), "wred-dropped-pkts": (m.DROPPED, ("wred",)),
                  "no-buffer-uc-dropped-pkts": (m.DROPPED, ("no_buffer",)), "max-queue-len": (m.WATERMARK, ())}


@dataclass
class Decoded:
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    updates: int = 0  # updates read, whole or in part


def decode(path_set: str, switch: str, notification: gnmi_pb2.Notification) -> Decoded:
    out = Decoded()
    reader = _sonic_update if path_set == "sonic" else _cumulus_update
    for update in notification.update:
        try:
            reader(switch, notification.prefix, update, out)
            out.updates += 1
        except Exception as exc:  # one update the switch got wrong (or a decoder bug) loses that update alone
            out.errors.append(f"{_path_text(notification.prefix, update.path)}: {exc}")
    return out


def _path_text(prefix: gnmi_pb2.Path, path: gnmi_pb2.Path) -> str:
    elems = [*prefix.elem, *path.elem]
    return "/" + "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in elems)


def _number(value: object) -> float:
    """COUNTERS_DB holds every counter as a decimal string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"counter value {value!r} is not a decimal")
    return float(int(value))


def _json(update: gnmi_pb2.Update) -> dict:
    kind = update.val.WhichOneof("value")
    if kind not in ("json_ietf_val", "json_val"):
        raise ValueError(f"expected a JSON value, got {kind}")
    data = json.loads(getattr(update.val, kind))
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _sonic_update(switch: str, prefix: gnmi_pb2.Path, update: gnmi_pb2.Update, out: Decoded) -> None:
    elems = [e.name for e in (*prefix.elem, *update.path.elem)]
    data = _json(update)
    if elems and elems[-1] in ("Queues", "Pfcwd"):
        for key, fields in data.items():
            port, sep, queue = key.partition(":")
            if not sep or ":" in queue or not isinstance(fields, dict):
                continue  # "Ethernet68:1:periodic": the periodic watermark sonic-gnmi adds, not exported
            (_sonic_watchdog if elems[-1] == "Pfcwd" else _sonic_queue)(switch, port, queue, fields, out)
        return
    if all(isinstance(v, dict) for v in data.values()):
        ports = data
    elif elems:
        ports = {elems[-1]: data}
    else:
        raise ValueError("one port's counters with no port in the path")
    for port, fields in ports.items():
        _sonic_port(switch, port, fields, out)


def _sonic_port(switch: str, port: str, fields: dict, out: Decoded) -> None:
    for name, value in fields.items():
        if frames := _PFC_FRAMES.fullmatch(name):
            direction = frames.group(2).lower()
            out.samples.append(Sample(m.PAUSE_FRAMES, (switch, port, frames.group(1), direction), _number(value)))
        elif duration := _PFC_DURATION_US.fullmatch(name):
            out.samples.append(Sample(m.PAUSE_DURATION, (switch, port, duration.group(1), "rx"), _number(value) * _US))


def _sonic_queue(switch: str, port: str, queue: str, fields: dict, out: Decoded) -> None:
    for name, (metric, extra) in _QUEUE_FIELDS.items():
        if name in fields:
            out.samples.append(Sample(metric, (switch, port, queue, *extra), _number(fields[name])))


def _sonic_watchdog(switch: str, port: str, queue: str, fields: dict, out: Decoded) -> None:
    if "PFC_WD_STATUS" in fields:
        status = fields["PFC_WD_STATUS"]
        if status not in _WATCHDOG_STATUS:
            raise ValueError(f"PFC_WD_STATUS {status!r} is neither operational nor stormed")
        out.samples.append(Sample(m.WATCHDOG_STORMED, (switch, port, queue), _WATCHDOG_STATUS[status]))
    for name, (metric, extra) in _WATCHDOG_FIELDS.items():
        if name in fields:
            out.samples.append(Sample(metric, (switch, port, queue, *extra), _number(fields[name])))


def _scalar(val: gnmi_pb2.TypedValue) -> float:
    kind = val.WhichOneof("value")
    if kind in ("uint_val", "int_val"):
        return float(getattr(val, kind))
    if kind in ("json_ietf_val", "json_val"):
        return _number(json.loads(getattr(val, kind)))
    raise ValueError(f"expected an integer value, got {kind}")


def _cumulus_update(switch: str, prefix: gnmi_pb2.Path, update: gnmi_pb2.Update, out: Decoded) -> None:
    elems = {e.name: e.key for e in (*prefix.elem, *update.path.elem)}
    leaf = update.path.elem[-1].name if update.path.elem else ""
    port = elems.get("interface", {}).get("interface-id") or elems.get("interface", {}).get("name")
    if not port:
        raise ValueError("no interface[interface-id] key")
    if leaf in _CUMULUS_PRIORITY:
        metric, direction, scale = _CUMULUS_PRIORITY[leaf]
        priority = elems.get("switch-priority", {}).get("priority")
        if priority is None:
            raise ValueError("no switch-priority[priority] key")
        out.samples.append(Sample(metric, (switch, port, priority, direction), _scalar(update.val) * scale))
    elif leaf in _CUMULUS_QUEUE:
        metric, extra = _CUMULUS_QUEUE[leaf]
        queue = elems.get("queue", {}).get("name")
        if queue is None:
            raise ValueError("no queue[name] key")
        out.samples.append(Sample(metric, (switch, port, queue, *extra), _scalar(update.val)))
    else:
        raise ValueError(f"leaf {leaf!r} is not in the cumulus path set")
