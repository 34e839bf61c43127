"""The quarantine receiver's tests: Alertmanager's webhook payloads, the token, and a post to the app.
The fake ``scontrol`` the receiver drives is the ``scontrol`` fixture (tests/alerts/conftest.py)."""
from __future__ import annotations

import json

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def notification(*alerts: dict, status: str = "firing") -> dict:
    """An Alertmanager webhook payload (version 4) as Alertmanager 0.25 posts it; an alert's ``status``
    of firing or resolved is its state, any other value its ``status`` label (ValidationFailed has one)."""
    return {"version": "4", "groupKey": "{}:{alertname=\"x\"}", "truncatedAlerts": 0, "status": status,
            "receiver": "quarantine", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://am:9093", "alerts": [
                {"status": a.pop("status") if a.get("status") in ("firing", "resolved") else status, "labels": a,
                 "annotations": {}, "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                 "generatorURL": "", "fingerprint": "f"} for a in alerts]}


def xid(node: str, gpu: str, code: str, **extra: str) -> dict:
    return {"alertname": "GPUXidCritical", "severity": "page", "node": node, "gpu": gpu, "xid": code, **extra}


async def post(client, payload: dict, headers: dict | None = None):
    resp = await client.post("/alerts", data=json.dumps(payload), headers=AUTH if headers is None else headers)
    return resp.status, await resp.json()
