"""``lockstep demo``: the whole stack on a simulated 16-node x 8-GPU cluster on this machine.

Simulator (demo scenario: thermal straggler, checkpoint cycle, PFC pause storm), one node agent per
simulated node, the power exporter on the simulated Redfish service, the storage exporter on the simulated
MinIO, VAST and WEKA (simulator/storagesys.py), Prometheus with the generated
rules, Alertmanager paging a local webhook receiver that prints to this terminal, and the analytics
service. Ctrl-C (or SIGTERM) stops every process it started.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Sequence

from lockstep import demo_config as cfg


def add_parser(subparsers: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    p = subparsers.add_parser("demo", help="run the whole stack on a simulated cluster on this machine",
                              description="run the whole stack on a simulated cluster on this machine")
    cfg.add_flags(p)
    p.set_defaults(func=run)


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    from lockstep.stack import MissingBinary
    try:
        config = cfg.config_from_args(args)
    except ValueError as exc:
        print(f"lockstep demo: {exc}", file=sys.stderr)
        return 2
    node_count = config.nodes or _scenario_nodes(config)
    if problems := cfg.check_ports(config, node_count):
        print("lockstep demo: cannot start:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    # Ctrl-C raises KeyboardInterrupt even when started with SIGINT ignored (e.g. `cmd &` in a script).
    previous = signal.signal(signal.SIGTERM, _raise_stop), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _run(config)
    except MissingBinary as exc:
        print(f"lockstep demo: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _scenario_nodes(config: cfg.DemoConfig) -> int:
    from lockstep.exporters.toolkit.configfile import load_yaml
    return int(load_yaml(config.scenario)["cluster"]["nodes"])


def _run(config: cfg.DemoConfig) -> int:
    from lockstep.demo_grafana import compose_hint
    from lockstep.demo_pager import Pager
    from lockstep.demo_stack import start_all, stop_all, wait_targets_up
    from lockstep.demo_watch import AlertWatcher, FindingWatcher, format_table, status_rows
    from lockstep.stack import Stack

    config.workdir.mkdir(parents=True, exist_ok=True)
    nodes = f" (first {config.nodes} nodes)" if config.nodes else ""
    print(f"lockstep demo: scenario {config.scenario.name}{nodes}, speed x{config.speed:g}, scheduler "
          f"{config.scheduler}, workdir {config.workdir}", flush=True)
    pager, stack, code = Pager(cfg.resolve(config.ports["pager_port"]), config.workdir / "pages.jsonl"), Stack(), 0
    try:
        services = start_all(config, stack, pager.url)
        prom = services["prometheus"].url
        scraped = [n for n in services if n.startswith("node agent ")] + ["power exporter", "storage exporter", "analytics"]
        wait_targets_up(prom, expected=len(scraped))
        grafana = _grafana(config, prom, stack) if config.grafana else None
        if grafana:
            services["grafana"] = grafana
        _write_state(config, services, pager.url)
        print("\nall components up\n" + format_table(status_rows(services)), flush=True)
        print(f"\n  demo pager (Alertmanager webhook): {pager.url}/pager    pages logged to {config.workdir / 'pages.jsonl'}")
        print(f"  analytics jobs: {services['analytics'].url}/api/v1/jobs    alerts: {prom}/alerts")
        print(f"  dashboards: {grafana.url + '/dashboards' if grafana else compose_hint(int(prom.rsplit(':', 1)[1]))}")
        print("\nwatching alerts (Ctrl-C stops everything)", flush=True)
        _watch([AlertWatcher(prom), FindingWatcher(services["analytics"].url)], services, config.duration_s)
    except (KeyboardInterrupt, _Stop):
        print("\nstopping...", flush=True)
    except RuntimeError as exc:  # a component did not start: its log tail is in the message
        print(f"lockstep demo: {exc}", file=sys.stderr)
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(stack)
        pager.stop()
    print(f"lockstep demo: stopped; logs and data kept in {config.workdir}", flush=True)
    return code


def _grafana(config: cfg.DemoConfig, prometheus_url: str, stack):
    """Dashboards are optional: a Grafana that fails to start is reported, the demo goes on."""
    from lockstep.demo_grafana import start_grafana
    try:
        return start_grafana(config.workdir, prometheus_url, cfg.resolve(config.ports["grafana_port"]), stack)
    except RuntimeError as exc:
        print(f"lockstep demo: grafana-server did not start, going on without it: {str(exc)[:500]}", flush=True)
        return None


def _watch(watchers, services, duration_s: float | None) -> None:
    from lockstep.demo_watch import format_table, status_rows
    deadline = time.monotonic() + duration_s if duration_s else float("inf")
    dead: set[str] = set()
    while time.monotonic() < deadline:
        for line in (line for w in watchers for line in w.poll()):
            print(f"  {time.strftime('%H:%M:%S')} {line}", flush=True)
        if newly := {n for n, s in services.items() if not s.alive()} - dead:
            dead |= newly
            print("component exited:\n" + format_table(status_rows(services)), flush=True)
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))


def _write_state(config: cfg.DemoConfig, services, pager_url: str) -> None:
    """workdir/demo.json: URLs and process ids (for scripts and the demo test)."""
    state = {"components": {n: {"url": s.url, "pid": s.proc.pid} for n, s in services.items()},
             "pager": pager_url, "pages": str(config.workdir / "pages.jsonl")}
    (config.workdir / "demo.json").write_text(json.dumps(state, indent=1))
