"""A simulated cluster on this machine: the simulator, one node agent per simulated node, the power
exporter, and Prometheus configured for them, or a Prometheus filled from a simulated series.

Shared by the demo, the integration tests and the benchmarks so they all wire things the same way
(the scrape jobs of ``exporters.catalog.selectors``, which the rules, dashboards and analytics select
on; every node-agent target carries a ``node`` label).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from exporters.catalog.selectors import ANALYTICS_JOB, NODE_JOB, POWER_JOB
from lockstep.stack import (Service, Stack, bind_failed, free_port, on_free_port, require_binary, start_on_port,
                            start_process, start_prometheus, wait_ready)

LOCKSTEP = [sys.executable, "-m", "lockstep"]


def start_sim(scenario: str | Path, root: Path, stack: Stack, speed: float = 1.0,
              redfish_port: int | None = None, extra_args: Sequence[str] = (), timeout: float = 60.0) -> Service:
    """Run ``lockstep sim run`` in the background; ready once it has written ``root/cluster.json``."""
    def start(port: int) -> Service:
        argv = [*LOCKSTEP, "sim", "run", str(scenario), "--root", str(root), "--speed", str(speed),
                "--redfish-listen", f"127.0.0.1:{port}", *extra_args]
        service = start_process("sim", argv, root.parent / f"{root.name}-logs", f"http://127.0.0.1:{port}",
                                ready_path=None)
        deadline = time.monotonic() + timeout
        while not (root / "cluster.json").exists():
            if not service.alive() or time.monotonic() > deadline:
                service.stop()
                raise RuntimeError(f"simulator did not start:\n{service.log_tail()}")
            time.sleep(0.1)
        return service
    return stack.add(on_free_port(start, redfish_port))


def sim_nodes(root: Path) -> list[str]:
    """Node names of a running simulation, from cluster.json (or the node directories)."""
    try:
        nodes = json.loads((root / "cluster.json").read_text()).get("nodes")
    except (OSError, ValueError):
        nodes = None
    if nodes:
        return [n if isinstance(n, str) else n["name"] for n in nodes]
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "sys").is_dir())


def gpus_per_node(root: Path) -> dict[str, int]:
    """``{node: GPUs}`` of a running simulation (empty without cluster.json)."""
    try:
        nodes = json.loads((root / "cluster.json").read_text()).get("nodes") or []
    except (OSError, ValueError):
        return {}
    return {n["name"]: len(n.get("gpus", ())) for n in nodes if isinstance(n, dict)}


def start_node_agents(root: Path, stack: Stack, nodes: Sequence[str] | None = None,
                      base_port: int | None = None, extra_args: Sequence[str] = (),
                      log_dir: Path | None = None) -> dict[str, Service]:
    """One ``lockstep exporter --sim.node-root root/<node>`` per node; ports from ``base_port`` up
    (free ephemeral ports when None). All start at once (Python start-ups in parallel), then each is
    waited for until it serves /metrics. Each agent expects the GPUs cluster.json gives its node (as a
    site would pass its node's GPU count), unless ``extra_args`` says otherwise."""
    expected = gpus_per_node(root) if not any(a.startswith("--gpu.expected-count") for a in extra_args) else {}

    def start(node: str, port: int, ready: bool) -> Service:
        argv = [*LOCKSTEP, "exporter", f"--sim.node-root={root / node}", f"--web.listen-address=127.0.0.1:{port}",
                *([f"--gpu.expected-count={expected[node]}"] if node in expected else []), *extra_args]
        return start_process(f"exporter-{node}", argv, log_dir or root.parent / f"{root.name}-logs",
                             f"http://127.0.0.1:{port}", ready_path="/metrics" if ready else None, timeout=120)

    agents: dict[str, Service] = {}
    for i, node in enumerate(nodes or sim_nodes(root)):
        agents[node] = stack.add(start(node, base_port + i if base_port else free_port(), ready=False))
    for node, service in agents.items():
        try:
            wait_ready(service, "/metrics", timeout=120)
        except RuntimeError as exc:
            if base_port or not bind_failed(exc):
                raise
            agents[node] = stack.add(on_free_port(lambda port: start(node, port, ready=True), None))
    return agents


def start_power_exporter(config: Path, stack: Stack, port: int | None = None, workdir: Path | None = None) -> Service:
    return stack.add(start_on_port("power-exporter", lambda p: [
        *LOCKSTEP, "power-exporter", f"--config={config}", f"--web.listen-address=127.0.0.1:{p}"],
        workdir or config.parent, port, ready_path="/metrics"))


def prometheus_config(node_targets: Mapping[str, str], *, power_target: str | None = None,
                      analytics_target: str | None = None, rule_files: Sequence[Path] = (),
                      alertmanager: str | None = None, scrape_interval: str = "5s",
                      evaluation_interval: str | None = None, cluster: str = "sim") -> dict[str, Any]:
    """A prometheus.yml (as a dict) for a local simulated cluster. ``node_targets`` maps node name to
    ``host:port``; each target gets its ``node`` label as the conventions require."""
    scrape = [{"job_name": NODE_JOB, "static_configs": [
        {"targets": [address], "labels": {"node": node}} for node, address in node_targets.items()]}]
    if power_target:
        scrape.append({"job_name": POWER_JOB, "static_configs": [{"targets": [power_target]}]})
    if analytics_target:
        scrape.append({"job_name": ANALYTICS_JOB, "static_configs": [{"targets": [analytics_target]}]})
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "scrape_timeout": scrape_interval,
                   "evaluation_interval": evaluation_interval or scrape_interval,
                   "external_labels": {"cluster": cluster}},
        "scrape_configs": scrape,
    }
    if rule_files:
        config["rule_files"] = [str(p) for p in rule_files]
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return config


def host_port(service: Service) -> str:
    return service.url.split("://", 1)[1]


# --- backfill: simulated series -> Prometheus TSDB blocks -------------------------------------------

def _label_columns(metric_name: str) -> list[str]:
    from exporters.catalog import get
    # [issue 8, dashboards helper] `node` is already the frame's own column (a metric such as
    # lockstep_rank_step_seconds also lists it as a catalog label): emit it once.
    return [label for label in get(metric_name).labels if label != "node"]


def _job_of(metric_name: str) -> str:
    from exporters.catalog import analytics, get, power
    metric = get(metric_name)
    return POWER_JOB if metric in power.METRICS else ANALYTICS_JOB if metric in analytics.METRICS else NODE_JOB


def series_to_openmetrics(frame, out: Path) -> Path:
    """Write the simulator's long frame as OpenMetrics text, one series after another, time-ordered.

    Node-level series get the ``node`` label and ``instance``/``job`` as a live scrape would give
    them; cluster-level series (empty ``node``) get only the ``job`` of the component emitting them.
    """
    from exporters.exposition import escape_label_value, format_value

    with open(out, "w") as fh:
        for metric, group in frame.groupby("metric", observed=True, sort=True):
            labels, job = _label_columns(str(metric)), _job_of(str(metric))
            keys = ["node", *labels]
            # a label the frame lacks is empty, as Prometheus has it (a frame written before the label existed)
            group = group.assign(**{label: "" for label in labels if label not in group.columns})
            group = group.sort_values([*keys, "timestamp"], kind="stable")
            for key, series in group.groupby(keys, observed=True, sort=False):
                key = key if isinstance(key, tuple) else (key,)
                node, values = str(key[0]), key[1:]
                pairs = [("job", job)] + ([("instance", node), ("node", node)] if node else [])
                pairs += [(name, str(v)) for name, v in zip(labels, values)]
                prefix = f"{metric}{{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs) + "} "
                ts = series["timestamp"].to_numpy()
                vals = series["value"].to_numpy()
                fh.writelines(f"{prefix}{format_value(v)} {t:.3f}\n" for t, v in zip(ts, vals))
        fh.write("# EOF\n")
    return out


def backfill(frame_or_parquet, workdir: Path, max_block_duration: str | None = None) -> Path:
    """Turn a simulated series (frame or parquet path) into TSDB blocks under ``workdir/data``.

    Start Prometheus on it with ``start_prometheus(config, workdir)`` (same data dir) and query the
    simulated time range (the series' timestamps, e.g. 2026-01-01 for `sim series`).
    """
    import pandas as pd

    frame = pd.read_parquet(frame_or_parquet) if isinstance(frame_or_parquet, (str, Path)) else frame_or_parquet
    workdir.mkdir(parents=True, exist_ok=True)
    text = series_to_openmetrics(frame, workdir / "series.om")
    data = workdir / "data"
    # [issue 9, report] a month in promtool's default 2h blocks is 372 blocks (~40 s); one block per
    # max_block_duration (e.g. "744h", a hidden promtool flag in 2.42) builds in under a second.
    extra = [f"--max-block-duration={max_block_duration}"] if max_block_duration else []
    result = subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", *extra,
                             str(text), str(data)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"promtool backfill failed: {result.stderr[-2000:]}")
    text.unlink()
    return data


_RECORDED_NAME = re.compile(r"\b[a-zA-Z_]\w*:[\w:]*")


def backfill_rules(groups: Sequence[dict[str, Any]], workdir: Path, start: float, end: float) -> None:
    """Add the recording rules of ``groups`` (a rule file's groups), evaluated over ``start..end``, to
    the TSDB under ``workdir/data`` (what ``backfill`` wrote), as a running Prometheus would have.

    ``promtool tsdb create-blocks-from rules`` reads its input from a live Prometheus and cannot
    evaluate a rule on series it records in the same run, so rules that read recorded series wait
    for a later pass, once what they read is in the TSDB.
    """
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
        passes = [{**g, "rules": [r for j, r in enumerate(g["rules"]) if (i, j) in ready]} for i, g in enumerate(groups)]
        _backfill_pass([g for g in passes if g["rules"]], workdir, start, end, workdir / f"rules-pass{len(done)}")
        done |= ready
    if len(done) < len(rules):
        raise ValueError(f"recording rules that read each other: {sorted(r['record'] for i, j, r in rules if (i, j) not in done)}")


def _backfill_pass(groups: list[dict[str, Any]], workdir: Path, start: float, end: float, out: Path) -> None:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    rule_file = out / "rules.yml"
    rule_file.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    with Stack() as stack:
        prom = stack.add(start_prometheus({"global": {"scrape_interval": "15s"}, "scrape_configs": []}, workdir))
        result = subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "rules", "--quiet",
                                 f"--url={prom.url}", f"--start={int(start)}", f"--end={int(end) + 1}",
                                 f"--output-dir={out / 'blocks'}", str(rule_file)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"promtool rules backfill failed: {result.stderr[-2000:]}")
    for block in (out / "blocks").iterdir():
        shutil.move(str(block), workdir / "data" / block.name)
