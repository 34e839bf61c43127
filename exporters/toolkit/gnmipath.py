"""gNMI paths as text (``/a/b[k=v]/c``) and back: what the switch exporter subscribes to and the fake
switch serves."""
from __future__ import annotations

import re

from lockstep.exporters.third_party.gnmi import gnmi_pb2

_ELEM = re.compile(r"([^/\[\]]+)((?:\[[^=\]]+=[^\]]*\])*)")
_KEY = re.compile(r"\[([^=\]]+)=([^\]]*)\]")


def parse_path(text: str) -> gnmi_pb2.Path:
    """``/qos/interfaces/interface[interface-id=*]/state`` → a gNMI ``Path`` of ``PathElem``s with keys."""
    path = gnmi_pb2.Path()
    for part in _split(text.strip("/")):
        match = _ELEM.fullmatch(part)
        if not match:
            raise ValueError(f"malformed gNMI path element {part!r} in {text!r}")
        path.elem.add(name=match.group(1), key=dict(_KEY.findall(match.group(2))))
    return path


def _split(text: str) -> list[str]:
    """Split on ``/`` outside ``[...]`` (a key value may hold a slash: ``[name=Ethernet1/1]``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "/" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def format_path(path: gnmi_pb2.Path) -> str:
    return "/" + "/".join(e.name + "".join(f"[{k}={v}]" for k, v in sorted(e.key.items())) for e in path.elem)
