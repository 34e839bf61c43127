"""NCCL RAS status answers parsed into frozen records: text in, ``RasStatus`` out.

The formats are NCCL's own writers in ``src/ras/client_support.cc`` (NCCL 2.24 to 2.30):

- JSON (``SET FORMAT json``, NCCL 2.28.7 and later; ``rasDumpCommsToJSON`` and the ``json*`` writers): every
  communicator with its ``hash``, ``secondary_hash``, ``size``, ``ranks_count`` and ``missing_ranks_count``;
  each rank that answered with ``host`` (an IP address; ``"unknown"`` when RAS lost the process), ``pid``,
  ``cuda_dev``, ``nvml_dev``, ``status`` (``init_state``, ``async_error``: ``ncclResult_t`` codes;
  ``finalize_called``, ``destroy_flag``, ``abort_flag``) and ``collective_counts`` by NCCL's function name;
  each missing rank with the same identity and ``status`` ``unresponsive`` / ``considered_dead``; then
  ``ras.collection_time_sec`` and ``ras.timeouts_count``. NCCL 2.28.7 and 2.28.9 leave out the comma between
  a missing rank's ``nvml_dev`` and its ``status`` (fixed in 2.29.2): that one defect is repaired here.
- Text (``STATUS`` / ``VERBOSE STATUS``, every version; ``rasClientRunInit`` and ``rasClientRunComms``): a job
  summary, a table of communicator groups, then an ``Errors`` and a ``Warnings`` section naming only the
  communicators with problems (``#<group>-<n> (<hash>) INCOMPLETE|ERROR|MISMATCH``) and, for the ranks RAS
  singles out as outliers, their GPU, process and node. Per-rank collective counts appear only there (by
  collective from NCCL 2.26, as one total in 2.24 and 2.25, collective ``"all"``).

Anything that is not such an answer raises ``RasParseError`` (and nothing else).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lockstep.exporters.toolkit.jsonload import load_json

MAX_ANSWER_CHARS = 64 << 20
HASH_DIGITS = 16
ALL_COLLECTIVES = "all"
# ncclResult_t (nccl.h), by code.
NCCL_RESULTS = ("ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout")
SUCCESS, IN_PROGRESS = 0, 7
# ncclErrorToString in client_support.cc: the text answer's words for a code ("Unexpected error": any other).
_ERROR_WORDS = {"Unhandled CUDA error": 1, "System error": 2, "Internal error": 3, "Invalid argument": 4,
                "Invalid usage": 5, "Remote process error": 6, "NCCL operation in progress": 7}
# The text answer's communicator states (statusStr; NCCL 2.24 and 2.25 said UNKNOWN for NOCOMM).
_TEXT_STATES = {"NOCOMM": "", "UNKNOWN": "", "INIT": "init", "RUNNING": "running", "FINALIZE": "finalize",
                "ABORT": "abort"}


class RasParseError(ValueError):
    """Not a RAS status answer, or one cut short."""


@dataclass(frozen=True, slots=True)
class Rank:
    """One rank that answered. ``host`` is the address NCCL knows its node by ("" where RAS lost it), ``-1``
    an unknown number; ``state`` one of init, running, finalize, abort or "" (not said); ``async_error`` and
    ``init_state`` ``ncclResult_t`` codes or None (not said); ``counts`` (collective, operations issued)."""

    rank: int
    host: str = ""
    pid: int = -1
    cuda_dev: int = -1
    nvml_dev: int = -1
    state: str = ""
    init_state: int | None = None
    async_error: int | None = None
    counts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class MissingRank:
    """A rank RAS got no data for. ``unresponsive``: its process did not answer; ``dead``: RAS considers the
    process dead; ``not_member``: the process answered without holding the communicator. None: not said."""

    rank: int
    host: str = ""
    pid: int = -1
    cuda_dev: int = -1
    nvml_dev: int = -1
    unresponsive: bool | None = None
    dead: bool | None = None
    not_member: bool = False


@dataclass(frozen=True, slots=True)
class Communicator:
    """``hash``: 16 lowercase hex digits (as the text answer prints it). Counts are None where the answer does
    not say (a text answer says nothing of a communicator without problems)."""

    hash: str
    secondary_hash: str = ""
    size: int | None = None
    ranks_count: int | None = None
    missing_count: int | None = None
    unresponsive_count: int | None = None
    dead_count: int | None = None
    async_error_count: int | None = None
    ranks: tuple[Rank, ...] = ()
    missing: tuple[MissingRank, ...] = ()
    problems: tuple[str, ...] = ()     # text: INCOMPLETE, ERROR, MISMATCH as headed
    # (collective, the most operations any rank of it launched): every rank's in JSON; in text, where the
    # ranks' counts differ (MISMATCH), the highest count it gives, for a group of ranks or for one
    furthest: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Process:
    host: str
    pid: int
    cuda_devs: tuple[int, ...] = ()
    nvml_devs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CommGroup:
    """A row of the text answer's communicator table."""

    group: int
    comms: int
    nodes: int
    ranks_per_node: str
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str


@dataclass(frozen=True, slots=True)
class JobSummary:
    nodes: int
    processes: int
    gpus: int


@dataclass(frozen=True, slots=True)
class RasStatus:
    format: str                                  # json or text
    nccl_version: str = ""
    cuda_runtime_version: int | None = None
    cuda_driver_version: int | None = None
    communicators_count: int | None = None
    communicators: tuple[Communicator, ...] = ()
    groups: tuple[CommGroup, ...] = ()
    job: JobSummary | None = None
    timeouts: int | None = None
    collection_seconds: float | None = None
    dead_process_count: int | None = None
    unresponsive_process_count: int | None = None
    dead_processes: tuple[Process, ...] = field(default=())


def parse(text: str, fmt: str) -> RasStatus:
    if fmt == "json":
        return parse_json(text)
    if fmt == "text":
        return parse_text(text)
    raise RasParseError(f"unknown format {fmt!r}")


def normal_hash(value: str) -> str:
    """A communicator hash as 16 lowercase hex digits (JSON says ``0x%lx``, text ``%016lx``)."""
    digits = value[2:] if value[:2].lower() == "0x" else value
    if not digits or len(digits) > HASH_DIGITS or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise RasParseError(f"bad communicator hash {value!r}")
    return digits.lower().rjust(HASH_DIGITS, "0")


def rank_state(init_state: int, finalize_called: bool, destroy_flag: bool, abort_flag: bool) -> str:
    """As ``rasClientRunComms`` derives it: abort, then finalize (finalize called or destroyed), then running
    (initialised) or init."""
    if abort_flag:
        return "abort"
    if finalize_called or destroy_flag:
        return "finalize"
    return "running" if init_state == SUCCESS else "init"


def is_error(code: int | None) -> bool:
    """An ``init_state``/``async_error`` RAS counts as an error: anything but ncclSuccess and ncclInProgress."""
    return code is not None and code not in (SUCCESS, IN_PROGRESS)


# ---------------------------------------------------------------------------------------------- JSON

# NCCL 2.28.7 and 2.28.9 (jsonWriteMissingRank): "nvml_dev": N\n followed by "status" without a comma.
_MISSING_COMMA = re.compile(r'("nvml_dev": -?\d+)(\s*\n\s*"status")')


def parse_json(text: str) -> RasStatus:
    if len(text) > MAX_ANSWER_CHARS:
        raise RasParseError(f"answer of {len(text)} characters is over {MAX_ANSWER_CHARS}")
    try:
        doc = load_json(_MISSING_COMMA.sub(r"\1,\2", text))
    except ValueError as exc:
        raise RasParseError(f"not JSON: {exc}") from None
    doc = _dict(doc, "answer")
    comms = tuple(_json_comm(_dict(c, f"communicators[{i}]"), f"communicators[{i}]")
                  for i, c in enumerate(_list(doc, "communicators", "answer")))
    ras = doc.get("ras")
    ras = _dict(ras, "ras") if ras is not None else {}
    dead, unresponsive = set(), set()
    for comm in comms:
        for m in comm.missing:
            if m.dead:
                dead.add((m.host, m.pid))
            elif m.unresponsive:
                unresponsive.add((m.host, m.pid))
    return RasStatus(
        "json", _opt_str(doc, "nccl_version", "answer"), _opt_int(doc, "cuda_runtime_version", "answer"),
        _opt_int(doc, "cuda_driver_version", "answer"), _opt_int(doc, "communicators_count", "answer"), comms,
        timeouts=_opt_int(ras, "timeouts_count", "ras"), collection_seconds=_opt_float(ras, "collection_time_sec"),
        dead_process_count=len(dead), unresponsive_process_count=len(unresponsive))


def _json_comm(c: dict, where: str) -> Communicator:
    ranks = tuple(_plain_rank(r) or _json_rank(_dict(r, f"{where}.ranks[{i}]"), f"{where}.ranks[{i}]")
                  for i, r in enumerate(_list(c, "ranks", where)))
    missing = tuple(_json_missing(_dict(r, f"{where}.missing_ranks[{i}]"), f"{where}.missing_ranks[{i}]")
                    for i, r in enumerate(_list(c, "missing_ranks", where)))
    secondary = c.get("secondary_hash", "")
    if not isinstance(secondary, str):
        raise RasParseError(f"{where}.secondary_hash is not a string")
    return Communicator(
        normal_hash(_str(c, "hash", where)), secondary, _int(c, "size", where), _opt_int(c, "ranks_count", where),
        _opt_int(c, "missing_ranks_count", where),
        unresponsive_count=sum(1 for m in missing if m.unresponsive),
        dead_count=sum(1 for m in missing if m.dead),
        async_error_count=sum(1 for r in ranks if is_error(r.async_error)), ranks=ranks, missing=missing,
        furthest=_furthest(ranks))


def _furthest(ranks: tuple[Rank, ...]) -> tuple[tuple[str, int], ...]:
    most: dict[str, int] = {}
    for r in ranks:
        for name, value in r.counts:
            most[name] = max(value, most.get(name, value))
    return tuple(most.items())


def _plain_rank(r) -> Rank | None:
    """A rank whose every field has its expected type, read without naming where each one is (an answer lists
    every rank of the job: thousands); None for anything else, which ``_json_rank`` reads again and refuses
    with the field's place."""
    if type(r) is not dict:
        return None
    status, counts = r.get("status", {}), r.get("collective_counts", {})
    if type(status) is not dict or type(counts) is not dict:
        return None
    rank, host = r.get("rank"), r.get("host")
    pid, cuda_dev, nvml_dev = r.get("pid"), r.get("cuda_dev"), r.get("nvml_dev")
    init_state, async_error = status.get("init_state"), status.get("async_error")
    flags = (status.get("finalize_called"), status.get("destroy_flag"), status.get("abort_flag"))
    if type(rank) is not int or type(host) is not str:
        return None
    for v in (pid, cuda_dev, nvml_dev, init_state, async_error):   # loops, not all(): no generator per rank
        if v is not None and type(v) is not int:
            return None
    for f in flags:
        if f is not None and type(f) is not bool:
            return None
    for v in counts.values():
        if type(v) is not int or v < 0:
            return None
    state = rank_state(init_state, *(bool(f) for f in flags)) if init_state is not None else ""
    return Rank(rank, "" if host == "unknown" else host, -1 if pid is None else pid,
                -1 if cuda_dev is None else cuda_dev, -1 if nvml_dev is None else nvml_dev, state, init_state,
                async_error, tuple(counts.items()))


def _json_rank(r: dict, where: str) -> Rank:
    status = _dict(r.get("status", {}), f"{where}.status")
    init_state = _opt_int(status, "init_state", f"{where}.status")
    flags = [_opt_bool(status, k, f"{where}.status") for k in ("finalize_called", "destroy_flag", "abort_flag")]
    state = rank_state(init_state, *(bool(f) for f in flags)) if init_state is not None else ""
    counts = _dict(r.get("collective_counts", {}), f"{where}.collective_counts")
    pairs = []
    for name, value in counts.items():
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise RasParseError(f"{where}.collective_counts.{name} is not a count")
        pairs.append((name, value))
    return Rank(_int(r, "rank", where), _host(r, where), _opt_int(r, "pid", where, -1),
                _opt_int(r, "cuda_dev", where, -1), _opt_int(r, "nvml_dev", where, -1), state, init_state,
                _opt_int(status, "async_error", f"{where}.status"), tuple(pairs))


def _json_missing(r: dict, where: str) -> MissingRank:
    status = _dict(r.get("status", {}), f"{where}.status")
    unresponsive = _opt_bool(status, "unresponsive", f"{where}.status")
    return MissingRank(_int(r, "rank", where), _host(r, where), _opt_int(r, "pid", where, -1),
                       _opt_int(r, "cuda_dev", where, -1), _opt_int(r, "nvml_dev", where, -1), unresponsive,
                       _opt_bool(status, "considered_dead", f"{where}.status"), unresponsive is False)


def _host(r: dict, where: str) -> str:
    host = _str(r, "host", where)
    return "" if host == "unknown" else host


def _dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise RasParseError(f"{where} is not an object")
    return value


def _list(d: dict, key: str, where: str) -> list:
    value = d.get(key)
    if not isinstance(value, list):
        raise RasParseError(f"{where}.{key} is not a list")
    return value


def _int(d: dict, key: str, where: str) -> int:
    value = d.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RasParseError(f"{where}.{key} is not an integer")
    return value


def _opt_int(d: dict, key: str, where: str, default: int | None = None) -> int | None:
    return default if d.get(key) is None else _int(d, key, where)


def _str(d: dict, key: str, where: str) -> str:
    value = d.get(key)
    if not isinstance(value, str):
        raise RasParseError(f"{where}.{key} is not a string")
    return value


def _opt_str(d: dict, key: str, where: str) -> str:
    return "" if d.get(key) is None else _str(d, key, where)


def _opt_bool(d: dict, key: str, where: str) -> bool | None:
    value = d.get(key)
    if value is not None and not isinstance(value, bool):
        raise RasParseError(f"{where}.{key} is not a boolean")
    return value


def _opt_float(d: dict, key: str) -> float | None:
    value = d.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if value is not None:
        raise RasParseError(f"ras.{key} is not a number")
    return None


# ---------------------------------------------------------------------------------------------- text

_VERSION = re.compile(r"NCCL version (\S+) compiled with CUDA \S+")
_CUDA = re.compile(r"CUDA runtime version (-?\d+), driver version (-?\d+)")
_SUMMARY_FULL = re.compile(r"\(total\)\s+per node\s+per process\s+\(total\)\s+\(total\)")
_SUMMARY_TOTALS = re.compile(r"\(total\)\s+\(total\)\s+\(total\)")
_COMMUNICATORS = re.compile(r"Communicators\.\.\.(?: \((\d+(?:\.\d+)?)s\))?")
_GROUP = re.compile(r"(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:-\d+)?)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)")
_COMM = re.compile(r"#(\d+)-(\d+) \(([0-9a-f]{1,16})\) (INCOMPLETE|ERROR|MISMATCH)")
_PROCESS = re.compile(r"Process (-?\d+) on node ?(\S*) managing GPUs? ([\d,]*)(?: \(NVML ([\d,]*)\))?")
_JOB_MISSING = re.compile(r"Missing communicator data from (\d+) job process(?:es)?")
_JOB_DEAD = re.compile(r"(\d+) job process(?:es are| is) considered dead \(unreachable via the RAS network\)")
_TIMEOUTS = re.compile(r"Encountered (\d+) communication timeouts? while gathering communicator data")
_COMM_MISSING = re.compile(r"Missing communicator data from (\d+) ranks?")
_MISSING_LIST = re.compile(r"The missing ranks?: ([\d,]*)")
_INIT_ERRORS = re.compile(r"Initialization errors? on (\d+) ranks?")
_ASYNC_ERRORS = re.compile(r"Asynchronous errors? on (\d+) ranks?")
_REPORTED = re.compile(r"(\d+) ranks reported (.+)")
_STATUS_DIFF = "Communicator ranks have different status"
_COUNTS_DIFF = re.compile(r"Communicator ranks have different (\S+) operation counts")
_HAVE_STATUS = re.compile(r"(\d+) ranks have status ([A-Z]+)")
_UNKNOWN_RANKS = re.compile(r"The unknown ranks: ([\d,]*)")
_HAVE_LAUNCHED = re.compile(r"(\d+) ranks have (?:launched up to operation (\d+)|not launched any operations)")
# A rank line: what it says of the rank, then who it is.
_RANK = re.compile(
    r"Rank (\d+)(?P<what> has status [A-Z]+| reported .+?| has launched up to operation \d+"
    r"| has not launched any operations)?"
    r" -- (?:GPU (?P<cuda>-?\d+)(?: \(NVML (?P<nvml>-?\d+)\))? managed by process (?P<pid>-?\d+) on node ?"
    r"(?P<host>\S*)|\[process information not found\])")
_RANK_LIST_STATUS = re.compile(r"Rank ([\d,]+) has status ([A-Z]+)")


class _TextComm:
    """What the text answer says of one communicator, gathered over its blocks."""

    def __init__(self, hash_: str, group: int) -> None:
        self.hash, self.group = hash_, group
        self.problems: list[str] = []
        self.ranks: dict[int, dict] = {}
        self.missing: dict[int, dict] = {}
        self.unresponsive: int | None = None
        self.async_errors: int | None = None
        self.nocomm = 0
        # Where the indented lines are: incomplete, init, async, status or counts (of ``collective``), and the
        # value the group of ranks listed next shares.
        self.sub, self.collective, self.value = "", "", None
        self.furthest: dict[str, int] = {}

    def launched(self, value: int) -> None:
        """A count the MISMATCH block gives for the collective it is about."""
        if self.sub == "counts" and self.collective:
            self.furthest[self.collective] = max(value, self.furthest.get(self.collective, value))

    def rank(self, number: int) -> dict:
        return self.ranks.setdefault(number, {"counts": {}})

    def lost(self, number: int) -> dict:
        return self.missing.setdefault(number, {})


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _who(m: re.Match) -> dict:
    if m.group("pid") is None:
        return {}
    cuda = int(m.group("cuda"))
    nvml = int(m.group("nvml")) if m.group("nvml") is not None else cuda
    return {"host": m.group("host"), "pid": int(m.group("pid")), "cuda_dev": cuda, "nvml_dev": nvml}


def parse_text(text: str) -> RasStatus:
    if len(text) > MAX_ANSWER_CHARS:
        raise RasParseError(f"answer of {len(text)} characters is over {MAX_ANSWER_CHARS}")
    version, cuda = "", (None, None)
    job: JobSummary | None = None
    groups: list[CommGroup] = []
    comms: dict[str, _TextComm] = {}
    dead: list[Process] = []
    dead_count = unresponsive_count = timeouts = None
    collection = None
    seen_comms = no_comms = False
    section = ""           # "" (before the tables), errors, warnings
    block = ""             # the block the indented lines belong to: incomplete, dead, timeout or comm
    comm: _TextComm | None = None
    summary = ""           # the job summary's header just seen: full or totals
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if summary:
            numbers = line.split()
            if all(n.isdigit() for n in numbers) and len(numbers) == (5 if summary == "full" else 3):
                n = [int(x) for x in numbers]
                job = JobSummary(n[0], n[3], n[4]) if summary == "full" else JobSummary(n[0], n[1], n[2])
            summary = ""
            continue
        if m := _VERSION.fullmatch(line):
            version = m.group(1)
        elif m := _CUDA.fullmatch(line):
            cuda = (int(m.group(1)), int(m.group(2)))
        elif _SUMMARY_FULL.fullmatch(line):
            summary = "full"
        elif _SUMMARY_TOTALS.fullmatch(line):
            summary = "totals"
        elif m := _COMMUNICATORS.fullmatch(line):
            seen_comms = True
            collection = float(m.group(1)) if m.group(1) else None
        elif line == "No communicator data collected!":
            no_comms = True
        elif seen_comms and not section and (m := _GROUP.fullmatch(line)):
            groups.append(CommGroup(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5)),
                                    int(m.group(6)), m.group(7), m.group(8)))
        elif line in ("Errors", "Warnings") and seen_comms:
            section, block, comm = line.lower(), "", None
        elif not section or set(line) == {"="}:
            continue
        elif not raw.startswith(" "):   # a block's header starts the line; its details are indented
            comm = None
            if line in ("INCOMPLETE", "DEAD", "TIMEOUT"):
                block = line.lower()
            elif m := _COMM.fullmatch(line):
                block, key = "comm", normal_hash(m.group(3))
                comm = comms.setdefault(key, _TextComm(key, int(m.group(1))))
                comm.problems.append(m.group(4))
                comm.sub, comm.collective, comm.value = m.group(4).lower(), "", None
            else:
                block = ""
        elif block == "incomplete":
            if m := _JOB_MISSING.fullmatch(line):
                unresponsive_count = int(m.group(1))
        elif block == "dead":
            if m := _JOB_DEAD.fullmatch(line):
                dead_count = int(m.group(1))
            elif m := _PROCESS.fullmatch(line):
                dead.append(Process(m.group(2), int(m.group(1)), _ints(m.group(3)),
                                    _ints(m.group(4)) if m.group(4) is not None else _ints(m.group(3))))
        elif block == "timeout":
            if m := _TIMEOUTS.fullmatch(line):
                timeouts = int(m.group(1))
        elif block == "comm" and comm is not None:
            _comm_line(comm, line)
    if not seen_comms or not (groups or no_comms):
        raise RasParseError("no communicator table: not a RAS status answer, or one cut short")
    if section != "warnings":
        raise RasParseError("answer cut short before its warnings")
    return RasStatus(
        "text", version, cuda[0], cuda[1], sum(g.comms for g in groups),
        tuple(_text_comm(c, groups, dead, dead_count) for c in comms.values()), tuple(groups), job,
        timeouts or 0, collection, dead_count or 0, unresponsive_count or 0, tuple(dead))


def _comm_line(comm: _TextComm, line: str) -> None:
    """One indented line of a communicator's block."""
    if m := _COMM_MISSING.fullmatch(line):
        comm.unresponsive, comm.sub = int(m.group(1)), "incomplete"
    elif m := _MISSING_LIST.fullmatch(line):
        for number in _ints(m.group(1)):
            comm.lost(number).update(unresponsive=True)
    elif _INIT_ERRORS.fullmatch(line):
        comm.sub, comm.value = "init", None
    elif m := _ASYNC_ERRORS.fullmatch(line):
        comm.async_errors, comm.sub, comm.value = int(m.group(1)), "async", None
    elif m := _REPORTED.fullmatch(line):
        comm.value = _ERROR_WORDS.get(m.group(2), -1)
    elif line == _STATUS_DIFF:
        comm.sub, comm.value = "status", None
    elif m := _COUNTS_DIFF.fullmatch(line):
        name = m.group(1)
        comm.sub, comm.value = "counts", None
        comm.collective = ALL_COLLECTIVES if name == "collective" else name
    elif m := _HAVE_STATUS.fullmatch(line):
        comm.value = m.group(2)
        if m.group(2) in ("NOCOMM", "UNKNOWN"):
            comm.nocomm += int(m.group(1))
    elif m := _UNKNOWN_RANKS.fullmatch(line):
        for number in _ints(m.group(1)):
            comm.lost(number).update(not_member=True)
    elif m := _RANK_LIST_STATUS.fullmatch(line):
        if m.group(2) in ("NOCOMM", "UNKNOWN"):
            numbers = _ints(m.group(1))
            comm.nocomm += len(numbers)
            for number in numbers:
                comm.lost(number).update(not_member=True)
    elif m := _HAVE_LAUNCHED.fullmatch(line):
        comm.value = int(m.group(2)) if m.group(2) is not None else 0
        comm.launched(comm.value)
    elif m := _RANK.fullmatch(line):
        _rank_line(comm, int(m.group(1)), m.group("what"), _who(m))


def _rank_line(comm: _TextComm, number: int, what: str | None, who: dict) -> None:
    value = comm.value
    if what:   # a group of one rank: the value is on its own line
        what = what.strip()
        if what.startswith("has status "):
            value = what[len("has status "):]
            if value in ("NOCOMM", "UNKNOWN"):
                comm.nocomm += 1
        elif what.startswith("reported "):
            value = _ERROR_WORDS.get(what[len("reported "):], -1)
        elif what.startswith("has launched up to operation "):
            value = int(what[len("has launched up to operation "):])
        else:
            value = 0
    sub = comm.sub
    if sub == "incomplete":
        comm.lost(number).update(who, unresponsive=True)
    elif sub == "status" and value in ("NOCOMM", "UNKNOWN"):
        comm.lost(number).update(who, not_member=True)
    elif sub == "status" and isinstance(value, str):
        comm.rank(number).update(who, state=_TEXT_STATES.get(value, ""))
    elif sub in ("async", "init") and isinstance(value, int):
        comm.rank(number).update(who, **{"async_error" if sub == "async" else "init_state": value})
    elif sub == "counts" and isinstance(value, int) and comm.collective:
        entry = comm.rank(number)
        entry.update(who)
        entry["counts"][comm.collective] = value
        comm.launched(value)


def _text_comm(c: _TextComm, groups: list[CommGroup], dead: list[Process], dead_count: int | None) -> Communicator:
    group = next((g for g in groups if g.group == c.group), None)
    errors = group.errors.split(",") if group else []
    # The DEAD block lists every dead process unless there were too many to list.
    dead_ids = {(p.host, p.pid) for p in dead} if not dead_count or len(dead) == dead_count else None
    ranks = tuple(Rank(n, e.get("host", ""), e.get("pid", -1), e.get("cuda_dev", -1), e.get("nvml_dev", -1),
                       e.get("state", ""), e.get("init_state"), e.get("async_error"), tuple(e["counts"].items()))
                  for n, e in sorted(c.ranks.items()))
    missing = []
    for n, e in sorted(c.missing.items()):
        unresponsive = bool(e.get("unresponsive"))
        if not unresponsive:
            is_dead = False if e.get("not_member") else None
        elif dead_ids is not None and "pid" in e:
            is_dead = (e["host"], e["pid"]) in dead_ids
        else:
            is_dead = False if not dead_count else None
        missing.append(MissingRank(n, e.get("host", ""), e.get("pid", -1), e.get("cuda_dev", -1),
                                   e.get("nvml_dev", -1), unresponsive if (unresponsive or e.get("not_member"))
                                   else None, is_dead, bool(e.get("not_member"))))
    # A problem the communicator does not have is one its block would have said: zero, not unknown.
    unresponsive_n = c.unresponsive if c.unresponsive is not None else (
        0 if group is not None and "INCOMPLETE" not in errors else None)
    async_n = c.async_errors if c.async_errors is not None else (
        0 if "ERROR" in c.problems or (group is not None and "ERROR" not in errors) else None)
    missing_n = unresponsive_n + c.nocomm if unresponsive_n is not None else None
    listed = [m for m in missing if m.unresponsive]
    if unresponsive_n == 0 or not dead_count:
        dead_n = 0 if unresponsive_n is not None else None
    elif len(listed) == unresponsive_n and all(m.dead is not None for m in listed):
        dead_n = sum(1 for m in listed if m.dead)
    else:
        dead_n = None
    return Communicator(c.hash, "", group.ranks_per_comm if group else None, None, missing_n, unresponsive_n, dead_n,
                        async_n, ranks, tuple(missing), tuple(c.problems), tuple(c.furthest.items()))
