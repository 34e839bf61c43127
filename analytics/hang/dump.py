"""Reading a directory of Flight Recorder dumps, one file per rank, and decoding each into ``records``.

PyTorch's watchdog writes ``<prefix><global rank>`` (``TORCH_FR_DUMP_TEMP_FILE``, formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``): a pickle by default (``FlightRecorder::dump``, a dict of
strings, numbers, lists, tuples and None pickled by ``torch::jit::Pickler`` at protocol 2, no globals),
or JSON where the job dumps through ``_dump_fr_trace_json`` / ``_dump_nccl_trace_json``
(``FlightRecorder::dump_json``). The format is told by the first byte, not the name.

A dump is untrusted input (it comes off a cluster's shared disk): the file is capped in size and
never followed into a FIFO or device; JSON goes through ``lockstep.exporters.toolkit.jsonload`` (its nesting bounded
by the interpreter's recursion limit); pickle through an unpickler whose ``find_class`` refuses
everything, so no constructor, function or ``__reduce__`` payload can run, and what it builds can only
be plain containers and values. The parser then reads only the fields it knows, to the depth they
have, checking each one's type; nothing else in the document is walked, printed or kept (a
self-referencing or hugely shared structure elsewhere costs nothing). Any failure makes that rank's
dump unreadable with a reason (``DumpError``), never the others'.
"""
from __future__ import annotations

import gc
import io
import os
import pickle
import re
import stat
from dataclasses import dataclass, field, replace
from typing import Any

from lockstep.analytics.hang.records import STATES, Entry, PgConfig, PgStatus, RankDump
from lockstep.exporters.toolkit.jsonload import load_json

MAX_BYTES = 64 << 20      # default cap on one dump file
# <prefix><rank>, optionally with an extension someone added when copying the files together.
_NAME = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?:\.(?:json|pkl|pickle))?$")
_RANKS = re.compile(r"^\[\s*(?:\d+(?:\s*,\s*\d+)*)?\s*\]$")


class DumpError(ValueError):
    """One dump cannot be used; the message says why."""


class _NoGlobals(pickle.Unpickler):
    """Plain containers and values only: any global (class, function) is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name} (a dump holds plain values only)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id (a dump holds plain values only)")


def unpickle(data: bytes) -> Any:
    """``pickle.loads`` with every global refused; DumpError for anything else than a whole plain pickle."""
    try:
        # A reader with peek() lets the C unpickler take the unframed protocol-2 stream in large reads.
        return _NoGlobals(io.BufferedReader(io.BytesIO(data), 1 << 20)).load()
    except pickle.UnpicklingError as exc:
        raise DumpError(f"pickle refused or corrupt: {exc}") from None
    except EOFError:
        raise DumpError("pickle truncated") from None
    except RecursionError:
        raise DumpError("pickle nested too deeply") from None
    except MemoryError:
        raise DumpError("pickle too large to decode") from None
    except Exception as exc:  # the unpickler raises many types on corrupt opcodes (KeyError, IndexError, ...)
        raise DumpError(f"pickle corrupt: {type(exc).__name__}: {exc}") from None


def decode_bytes(data: bytes) -> tuple[str, Any]:
    """``(format, document)`` of a dump's bytes: JSON if it opens with ``{``, pickle if with a protocol
    opcode."""
    head = data.lstrip()[:1]
    if head == b"{":
        try:
            doc = load_json(data)
        except ValueError as exc:
            # The parser ran out of input, or inside a string that never ends: the file was cut short.
            cut = getattr(exc, "pos", -1) >= len(data.rstrip()) or str(exc).startswith("Unterminated")
            raise DumpError(f"{'truncated' if cut else 'not valid'} JSON: {exc}") from None
        fmt = "json"
    elif data[:1] == b"\x80":
        doc, fmt = unpickle(data), "pickle"
    else:
        raise DumpError("neither JSON nor a pickle" if data else "empty file")
    if not isinstance(doc, dict):
        raise DumpError(f"top level is a {type(doc).__name__}, not a dict")
    return fmt, doc


def parse(doc: dict, rank: int, file: str, fmt: str) -> RankDump:
    """A decoded dump → ``RankDump``; DumpError naming the first field that is not as PyTorch writes it."""
    version = doc.get("version")
    if not isinstance(version, str):
        raise DumpError("no version string: not a Flight Recorder dump")
    raw_entries = doc.get("entries", [])   # the JSON writer leaves the key out when there are none
    if not isinstance(raw_entries, list):
        raise DumpError("entries: not a list")
    entries = tuple(_entry(e, i) for i, e in enumerate(raw_entries))
    return RankDump(rank, file, fmt, version, _pg_config(doc.get("pg_config", {})),
                    _pg_status(doc.get("pg_status", {})), entries)


def _brief(value: Any) -> str:
    """A value for an error message, never the whole of an untrusted structure (or a huge integer)."""
    if isinstance(value, str):
        return repr(value[:40]) + ("..." if len(value) > 40 else "")
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() <= 64 else "a large integer"
    return f"a {type(value).__name__}"


def _int(value: Any, where: str, optional: bool = False) -> int | None:
    if type(value) is int or (value is None and optional):
        return value
    raise DumpError(f"{where}: {_brief(value)} is not an integer")


def _str(value: Any, where: str) -> str:
    if type(value) is str:
        return value
    raise DumpError(f"{where}: {_brief(value)} is not a string")


def _bool(value: Any, where: str) -> bool:
    if type(value) is bool:
        return value
    raise DumpError(f"{where}: {_brief(value)} is not a boolean")


def _sizes(value: Any, where: str) -> tuple[tuple[int, ...], ...]:
    if type(value) not in (list, tuple):
        raise DumpError(f"{where}: not a list of shapes")
    out = []
    for shape in value:
        if type(shape) not in (list, tuple) or not all(type(d) is int for d in shape):
            raise DumpError(f"{where}: {_brief(shape)} is not a shape")
        out.append(tuple(shape))
    return tuple(out)


def _dtypes(value: Any, where: str) -> tuple[str, ...]:
    if type(value) not in (list, tuple) or not all(type(d) is str for d in value):
        raise DumpError(f"{where}: not a list of dtype names")
    return tuple(value)


def _entry(e: Any, i: int) -> Entry:
    where = f"entries[{i}]"
    if not isinstance(e, dict):
        raise DumpError(f"{where}: not a dict")
    for key in ("record_id", "process_group", "collective_seq_id", "profiling_name"):
        if key not in e:
            raise DumpError(f"{where}: no {key}")
    pg = e["process_group"]   # a tuple (name, desc) in the pickle, a list in JSON
    if not isinstance(pg, (list, tuple)) or len(pg) != 2:
        raise DumpError(f"{where}.process_group: not a (name, desc) pair")
    name = _str(e["profiling_name"], f"{where}.profiling_name")
    state = _str(e.get("state", "scheduled"), f"{where}.state")
    if state not in STATES:
        raise DumpError(f"{where}.state: {_brief(state)} is not one of {', '.join(STATES)}")
    duration = e.get("duration_ms")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
        raise DumpError(f"{where}.duration_ms: not a number")
    is_p2p = e.get("is_p2p")
    entry = Entry(
        record_id=_int(e["record_id"], f"{where}.record_id"),
        pg_id=_int(e.get("pg_id", 0), f"{where}.pg_id"),
        pg_name=_str(pg[0], f"{where}.process_group"), pg_desc=_str(pg[1], f"{where}.process_group"),
        collective_seq_id=_int(e["collective_seq_id"], f"{where}.collective_seq_id"),
        p2p_seq_id=_int(e.get("p2p_seq_id", 0), f"{where}.p2p_seq_id"),
        op_id=_int(e.get("op_id", 0), f"{where}.op_id"),
        profiling_name=name,
        input_sizes=_sizes(e.get("input_sizes", []), f"{where}.input_sizes"),
        input_dtypes=_dtypes(e.get("input_dtypes", []), f"{where}.input_dtypes"),
        output_sizes=_sizes(e.get("output_sizes", []), f"{where}.output_sizes"),
        output_dtypes=_dtypes(e.get("output_dtypes", []), f"{where}.output_dtypes"),
        state=state,
        retired=_bool(e.get("retired", False), f"{where}.retired"),
        is_p2p=False if is_p2p is None else _bool(is_p2p, f"{where}.is_p2p"),
        time_created_ns=_int(e.get("time_created_ns", 0), f"{where}.time_created_ns"),
        timeout_ms=_int(e.get("timeout_ms"), f"{where}.timeout_ms", optional=True),
        duration_ms=None if duration is None else float(duration),
        # The JSON writer puts 0 where the pickle has None (not discovered).
        time_discovered_started_ns=_int(e.get("time_discovered_started_ns"), f"{where}.time_discovered_started_ns",
                                        optional=True) or None,
        time_discovered_completed_ns=_int(e.get("time_discovered_completed_ns"),
                                          f"{where}.time_discovered_completed_ns", optional=True) or None,
    )
    if is_p2p is None and entry.p2p is not None:   # dumps older than the is_p2p key
        entry = replace(entry, is_p2p=True)
    return entry


def parse_ranks(value: Any, where: str) -> tuple[int, ...]:
    """``"[0, 1, 2]"`` (how PyTorch writes a group's ranks, in both formats) or a list → sorted ranks."""
    if isinstance(value, (list, tuple)):
        return tuple(sorted(_int(r, where) for r in value))
    text = _str(value, where)
    if not _RANKS.match(text):
        raise DumpError(f"{where}: {_brief(text)} is not a list of ranks")
    return tuple(sorted(int(r) for r in re.findall(r"\d+", text)))


def _pg_config(value: Any) -> dict[str, PgConfig]:
    if not isinstance(value, dict):
        raise DumpError("pg_config: not a dict")
    out = {}
    for key, info in value.items():
        where = f"pg_config[{_brief(key)}]"
        if not isinstance(info, dict):
            raise DumpError(f"{where}: not a dict")
        name = _str(info.get("name", key), f"{where}.name")
        out[name] = PgConfig(name, _str(info.get("desc", ""), f"{where}.desc"),
                             parse_ranks(info.get("ranks", "[]"), f"{where}.ranks"))
    return out


def _counter(value: Any, where: str) -> int | None:
    """A status counter: an int in the pickle, its decimal string in JSON; -1 (nothing yet) → None."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value):
        value = int(value)
    number = _int(value, where, optional=True)
    return None if number is None or number < 0 else number


def _pg_status(value: Any) -> dict[int, PgStatus]:
    if not isinstance(value, dict):
        raise DumpError("pg_status: not a dict")
    out = {}
    for key, info in value.items():
        where = f"pg_status[{_brief(key)}]"
        if not (isinstance(key, str) and key.isdigit() and len(key) <= 20) or not isinstance(info, dict):
            raise DumpError(f"{where}: not a process group id with its counters")
        out[int(key)] = PgStatus(*(_counter(info.get(f"last_{k}_collective"), f"{where}.last_{k}_collective")
                                   for k in ("enqueued", "started", "completed")))
    return out


def read_file(path: str, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, at most ``max_bytes``; DumpError for what is not a readable regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise DumpError(f"cannot open: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DumpError("not a regular file")
        if info.st_size > max_bytes:
            raise DumpError(f"{info.st_size} bytes, over the cap of {max_bytes} (--max-bytes)")
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise DumpError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise DumpError(f"over the cap of {max_bytes} bytes (--max-bytes)")
    return data


def load(path: str, rank: int, max_bytes: int = MAX_BYTES) -> RankDump:
    fmt, doc = decode_bytes(read_file(path, max_bytes))
    return parse(doc, rank, os.path.basename(path), fmt)


@dataclass
class Unreadable:
    file: str
    rank: int | None
    reason: str


@dataclass
class DirRead:
    """What a dump directory gave: the ranks' dumps, the files that could not be used and why, and the
    files that are not dumps (no rank at the end of their name, or another prefix than ``--prefix``)."""
    dumps: dict[int, RankDump] = field(default_factory=dict)
    unreadable: list[Unreadable] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def read_dir(directory: str, prefix: str | None = None, max_bytes: int = MAX_BYTES) -> DirRead:
    """Every ``<prefix><rank>`` file of ``directory`` (not its subdirectories). Without ``prefix``, the
    files ending in a rank are taken whatever their prefix; two files for one rank make that rank
    unreadable (pass ``prefix`` to choose). OSError if the directory cannot be listed."""
    names = sorted(os.listdir(directory))
    out = DirRead()
    by_rank: dict[int, list[str]] = {}
    for name in names:
        m = _NAME.match(name)
        if not m or (prefix is not None and m.group("prefix") != prefix) or len(m.group("rank")) > 9:
            out.ignored.append(name)
            continue
        if os.path.isdir(os.path.join(directory, name)):
            out.ignored.append(name)
            continue
        by_rank.setdefault(int(m.group("rank")), []).append(name)
    collecting = gc.isenabled()
    gc.disable()      # millions of small containers, none of them cyclic garbage: the collector only costs time
    try:
        for rank, files in sorted(by_rank.items()):
            if len(files) > 1:
                out.unreadable.append(Unreadable(", ".join(files), rank,
                                                 f"{len(files)} files claim rank {rank}: pass --prefix to choose one"))
                continue
            try:
                out.dumps[rank] = load(os.path.join(directory, files[0]), rank, max_bytes)
            except DumpError as exc:
                out.unreadable.append(Unreadable(files[0], rank, str(exc)))
    finally:
        if collecting:
            gc.enable()
    return out
