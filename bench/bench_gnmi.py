"""The switch exporter's subscriber: CPU per 1,000 gNMI updates, against merely decoding the same messages.

In one run: the recorded notifications of both path sets (tests/fixtures/gnmi/) serialised as the
SubscribeResponse a switch sends; the baseline parses those bytes (``SubscribeResponse.FromString``, what
gRPC does for any client) and the JSON each SONiC update carries (``json.loads``); the subscriber parses
them and then does what its stream thread does per response
(``Subscriber._apply``: decode into catalog samples, keep each series' last value). CPU time
(``time.process_time``), the fastest of several repeats. A SONiC update carries a whole COUNTERS_DB table as
JSON, so its figures are per update and per series.

Budget: the subscriber within 20 times the baseline per update for each path set; exit status 1 when missed.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lockstep.exporters.gnmi.config import SwitchConfig, Target  # noqa: E402
from lockstep.exporters.gnmi.subscriber import Subscriber  # noqa: E402
from lockstep.exporters.third_party.gnmi import gnmi_pb2  # noqa: E402
from lockstep.simulator.gnmi import FakeSwitch, load_recording  # noqa: E402

BUDGET_RATIO = 20.0
REPEAT = 5


def cpu(fn, count: int) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = time.process_time()
        fn(count)
        best = min(best, time.process_time() - start)
    return best


def bench(path_set: str, messages: int) -> bool:
    recording = load_recording(json.loads((REPO / "tests" / "fixtures" / "gnmi" / f"{path_set}.json").read_text()))
    payload = gnmi_pb2.SubscribeResponse(update=FakeSwitch(recording).notification()).SerializeToString()
    updates = len(recording.updates)
    subscriber = Subscriber(SwitchConfig((Target("sw", "127.0.0.1:1", path_set),)))
    state = subscriber.states["sw"]

    def baseline(n: int) -> None:
        for _ in range(n):
            for update in gnmi_pb2.SubscribeResponse.FromString(payload).update.update:
                if update.val.json_ietf_val:
                    json.loads(update.val.json_ietf_val)

    def subscribe(n: int) -> None:
        for _ in range(n):
            subscriber._apply(state, gnmi_pb2.SubscribeResponse.FromString(payload).update)

    base, sub = cpu(baseline, messages), cpu(subscribe, messages)
    series = len(state.values)
    per_k = 1000 / (messages * updates)
    ratio = sub / base
    print(f"{path_set}: {updates} updates, {series} series per notification; per 1,000 updates: "
          f"baseline {base * per_k * 1e3:.2f} ms CPU, subscriber {sub * per_k * 1e3:.2f} ms CPU "
          f"({sub / (messages * series) * 1e6:.2f} µs per series); ratio {ratio:.1f} (budget {BUDGET_RATIO:g})")
    return ratio <= BUDGET_RATIO


def main() -> int:
    ok = bench("sonic", 2000) & bench("cumulus", 2000)
    print("ok" if ok else "BUDGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
