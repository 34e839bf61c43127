"""What ``lockstep validate ingest|run|report`` do, once the flags are parsed (validation/cli.py)."""
from __future__ import annotations

import argparse
import json
import shlex
import socket
import sys
from dataclasses import replace

from lockstep.validation import report as report_table
from lockstep.validation.baseline import ratios
from lockstep.validation.model import ParseError
from lockstep.validation.naming import expand_hostlist, name_from_argv
from lockstep.validation.parsers import MAX_BYTES, parse, parse_file
from lockstep.validation.result import Result, default_test, from_parsed, short_node, with_gpu_count
from lockstep.validation.runner import run_bounded
from lockstep.validation.store import RAW_TAIL_BYTES, Store, read_series

LOCAL_NAMES = {"localhost", "localhost.localdomain", "127.0.0.1", ""}


def this_node() -> str:
    return socket.gethostname()


def emit(doc: dict, as_json: bool, text: str) -> None:
    print(json.dumps(doc, indent=2, sort_keys=True) if as_json else text)


def resolve_nodes(given: list[str], hosts: tuple[str, ...] = ()) -> tuple[str, ...]:
    """--node values (host lists expanded), else the hosts the output names, else this host."""
    if given:
        return tuple(node for value in given for node in expand_hostlist(value))
    named = tuple(h for h in hosts if h not in LOCAL_NAMES)
    return named or (this_node(),)


def _store_and_print(args: argparse.Namespace, result: Result, raw: str | None) -> int:
    if args.expect_gpus is not None and result.status != "timeout":
        result = with_gpu_count(result, args.expect_gpus)
    doc = result.to_dict()
    del doc["figure_list"]
    if not getattr(args, "no_store", False):
        paths = Store(args.results_dir).write(result, raw)
        baseline = read_series(paths[0])["baseline"]["history"]
        doc.update(stored=[str(p) for p in paths], baselines={"history": baseline},
                   ratios={"history": ratios(result, baseline)})
    text = f"{result.kind} {result.test} on {','.join(result.nodes)}: {result.status}"
    text += f" ({result.message})" if result.message else ""
    emit(doc, args.json, text)
    return 0 if result.ok else 1


def ingest(args: argparse.Namespace) -> int:
    try:
        parsed = parse_file(args.kind, args.file)
    except ParseError as exc:
        print(f"lockstep validate ingest: error: {exc} (nothing stored)", file=sys.stderr)
        return 2
    started = args.started if args.started is not None else args.file.stat().st_mtime
    result = from_parsed(parsed, args.test or default_test(args.kind, parsed.test),
                         resolve_nodes(args.node, parsed.hosts), started, None, str(args.file))
    return _store_and_print(args, result, None)


def _test_name(args: argparse.Namespace, command: list[str], parsed_test: str = "") -> str:
    return args.test or parsed_test or name_from_argv(args.kind, command)


def _outcome_result(args: argparse.Namespace, command: list[str], outcome) -> Result:
    test = _test_name(args, command)
    shown = shlex.join(command)
    if outcome.timed_out:
        stuck = " (still there after SIGKILL: stuck in the kernel)" if outcome.stuck else ""
        return Result(args.kind, test, resolve_nodes(args.node), "timeout", outcome.started,
                      outcome.duration_seconds, message=f"killed after {args.timeout:g} s{stuck}: {shown}",
                      source=shown)
    if outcome.captured_stdout.truncated:
        # Not parsed: the parsers need the whole output (a JSON document, a table and its summary), and
        # `ingest` refuses a saved output past the same bound. Its head and tail are stored as its `.out`.
        return Result(args.kind, test, resolve_nodes(args.node), "error", outcome.started, outcome.duration_seconds,
                      message=f"{command[0]} stdout: {outcome.captured_stdout.size} bytes, larger than "
                              f"{MAX_BYTES >> 20} MiB: not one tool run's output, not parsed (its head and tail "
                              f"are kept); exit status {outcome.returncode}", source=shown)
    try:
        parsed = parse(args.kind, outcome.stdout, f"{command[0]} stdout")
    except ParseError as exc:
        tail = outcome.stderr.strip()[-500:]
        return Result(args.kind, test, resolve_nodes(args.node), "error", outcome.started, outcome.duration_seconds,
                      message=f"{exc}; exit status {outcome.returncode}; stderr: {tail}", source=shown)
    result = from_parsed(parsed, _test_name(args, command, parsed.test), resolve_nodes(args.node, parsed.hosts),
                         outcome.started, outcome.duration_seconds, shown)
    if outcome.returncode != 0 and result.status == "pass":
        # The output looks fine but the tool says otherwise (an MPI rank died after printing its table).
        result = replace(result, status="error",
                         message=f"exit status {outcome.returncode}: {outcome.stderr.strip()[-500:]}")
    return result


def run(args: argparse.Namespace) -> int:
    command = args.command
    if not command:
        raise ValueError("no tool to run: lockstep validate run KIND --timeout S -- TOOL ARGS...")
    outcome = run_bounded(command, args.timeout)
    # The store keeps the last RAW_TAIL_BYTES of this; a character is at least a byte, so no more is built.
    stderr = outcome.stderr[-RAW_TAIL_BYTES:]
    raw = outcome.stdout[-RAW_TAIL_BYTES:] + (f"\n--- stderr ---\n{stderr}" if stderr else "")
    return _store_and_print(args, _outcome_result(args, command, outcome), raw)


def report(args: argparse.Namespace) -> int:
    store = Store(args.results_dir)
    nodes = store.nodes() if args.all else resolve_nodes(args.node)
    docs = {short_node(node): store.node_series(short_node(node)) for node in nodes}
    rows = report_table.rows(docs)
    if args.json:
        print(json.dumps([row.__dict__ for row in rows], indent=2))
    else:
        print(report_table.render(rows, args.fraction), end="")
    return 0
