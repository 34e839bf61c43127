"""Recording rules evaluated over what a backfill wrote, as a running Prometheus would have recorded
them (``backfill_rules``): the dashboards of a backfilled range read recorded series too."""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lockstep.backfill.blocks import BlockWriter
from lockstep.exporters.toolkit.exposition import escape_label_value
from lockstep.exporters.toolkit.timeparse import duration_seconds
from lockstep.stack import Stack, start_prometheus

_RECORDED_NAME = re.compile(r"\b[a-zA-Z_]\w*:[\w:]*")


def backfill_rules(groups: Sequence[dict[str, Any]], workdir: Path, start: float, end: float,
                   interval: str | None = None) -> None:
    """Add the recording rules of ``groups`` (a rule file's groups), evaluated over ``start..end``
    (every ``interval`` if given, else at each group's own), to the TSDB under ``workdir/data`` (what
    ``backfill`` wrote), as a running Prometheus would have.

    Each rule is one range query over the whole range against a Prometheus on what is there, its
    answer written by ``BlockWriter`` (``promtool tsdb create-blocks-from rules`` makes a block per
    rule and two hours: 1,500 blocks and minutes for a month). Rules that read recorded series wait
    for a later pass, once what they read is in the TSDB.
    """
    groups = [{**g, "interval": interval} for g in groups] if interval else groups
    rules = [(i, j, r) for i, g in enumerate(groups) for j, r in enumerate(g["rules"]) if "record" in r]
    recorded = {r["record"] for _, _, r in rules}
    done: set[tuple[int, int]] = set()
    while True:
        # A name is complete once every rule recording it ran (one name may have several rules).
        complete = recorded - {r["record"] for i, j, r in rules if (i, j) not in done}
        ready = {(i, j) for i, j, r in rules
                 if (i, j) not in done and set(_RECORDED_NAME.findall(r["expr"])) & recorded <= complete}
        if not ready:
            break
        _rules_pass([(groups[i].get("interval", "1m"), r) for i, j, r in rules if (i, j) in ready], workdir,
                    start, end, workdir / f"rules-pass{len(done)}")
        done |= ready
    if len(done) < len(rules):
        cyclic = sorted(r["record"] for i, j, r in rules if (i, j) not in done)
        raise ValueError(f"recording rules that read each other: {cyclic}")


def _rules_pass(rules: list[tuple[str, dict]], workdir: Path, start: float, end: float, out: Path) -> None:
    import pandas as pd

    from lockstep.analytics.report.client import PromClient
    from lockstep.analytics.report.promrange import RangeQuery, fetch

    answers = []
    with Stack() as stack:
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, workdir))
        with PromClient(prom.url) as client:
            for every, rule in rules:
                query = RangeQuery(rule["record"], rule["expr"], duration_seconds(every))
                answers.append((rule, fetch(client, query, start, end, timeout=600)))
    names: dict[str, int] = {}
    samples = [_recorded(rule, frame, names) for rule, frame in answers if not frame.empty]
    if samples:
        # time order; one sample per series and time (two rules recording one name may meet)
        table = pd.concat(samples).drop_duplicates(["series", "timestamp"]).sort_values("timestamp", kind="stable")
        with BlockWriter(out, list(names), f"{max(2, int((end - start) // 3600) + 1)}h") as writer:
            writer.add(*(table[c].to_numpy() for c in ("series", "value", "timestamp")))
        for block in out.iterdir():
            shutil.move(str(block), workdir / "data" / block.name)


def _recorded(rule: dict, frame, names: dict[str, int]):
    """A rule's range-query answer as a frame of samples (series, value, timestamp) of its recorded
    series, numbered in ``names``."""
    import pandas as pd

    labels = [c for c in frame.columns if c not in ("timestamp", "value", "__name__")]
    keys = frame[labels].astype(object).where(frame[labels].notna(), None)
    ids = keys.groupby(labels, dropna=False, sort=False).ngroup().to_numpy() if labels else np.zeros(len(frame), int)
    first = keys.assign(_id=ids).drop_duplicates("_id").sort_values("_id")
    index = np.array([names.setdefault(_recorded_prefix(rule, row), len(names))
                      for row in first[labels].to_dict("records")])
    return pd.DataFrame({"series": index[ids], "value": frame["value"].to_numpy(dtype=float),
                         "timestamp": frame["timestamp"].to_numpy(dtype=float)})


def _recorded_prefix(rule: dict, labels: Mapping[str, Any]) -> str:
    """``record{labels}``: the query's labels, then the rule's own (which win)."""
    pairs = {k: str(v) for k, v in labels.items() if v is not None and v == v}
    pairs.update(rule.get("labels", {}))
    return f"{rule['record']}{{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(pairs.items())) + "}"
