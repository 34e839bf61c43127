"""WEKA clusters through the JSON-RPC answers of WEKA's management API (port 14000, ``/api/v1``; the calls are
``wekarpc``'s), mapped to the common storage-system metrics. Pure: answers in, buckets, counts and samples out.
The sources of every method, field and unit below are in tests/fixtures/weka/README.md.

What is read:
- ``stats_show`` of category ``ops`` for the whole cluster (no ``per_node``: the answer's one top key is ``all``),
  ``READS``, ``WRITES`` (operations per second), ``READ_BYTES``, ``WRITE_BYTES`` (bytes per second),
  ``READ_LATENCY``, ``WRITE_LATENCY`` (the mean per operation, microseconds). They are not counters: each list item
  is one minute, ``{"stats": {...}, "timestamp": ...}``, its values per-second averages over that minute. ``Counts``
  integrates them into the common counters at scope ``cluster``: a minute adds its rate times 60 to bytes and
  operations, and its mean latency times its operations to the latency total. The answer names no cluster, so the
  name is the target's own (the config's name for that cluster);
- ``filesystems_get_capacity``: per file system (keyed ``FSId<n>``) its ``name``, ``used_total`` and
  ``available_total``, bytes. ``available_total`` is the file system's size, not its free space: WEKA's own
  exporter reads ``used_total / available_total`` as the fraction used, and in WEKA's API description the free
  space (``free_total``) is ``available_total - used_total``. So ``used_bytes`` is ``used_total`` and
  ``capacity_bytes`` is ``available_total``, scope ``filesystem``, named by ``name``.

Per client host, only for a target with ``per_host: true`` (``wekarpc.WekaReader`` makes the calls, a part of the
target that fails alone):
- ``stats_show`` with the same six ``ops`` stats and interval, and ``per_node: True``, ``no_zeroes: True``,
  ``show_internal: True``, as WEKA's own exporter asks for its per-host statistics: the answer is keyed by node
  (``"NodeId<k>"``) instead of ``all``, each node holding the same ``{"ops": [...]}`` minutes;
- ``nodes_list``: per node id its ``hostname`` and ``roles``; ``hosts_list``: per host its ``hostname`` and ``mode``
  (``backend``: a server, anything else: a client, as WEKA's exporter reads it). These change rarely: the reader
  keeps them and asks again every ``wekarpc.MAP_TTL_S`` or when an answer holds a node id they lack.
Only ``FRONTEND`` nodes are counted. WEKA's exporter ties category ``ops`` to role ``FRONTEND``: its table of which
roles carry which category, left in its ``collector.py`` as a comment, maps ``ops`` and ``ops_driver`` to
``FRONTEND``, ``ops_nfs`` to ``COMPUTE``, ``ssd`` to ``DRIVES`` (README, fact 8). A client's I/O enters WEKA through
its frontend processes; a backend's compute and drive processes, should they report ``ops`` too, would be the
servers' side of that same I/O, and counting them beside the frontends would count it twice (our reading: no
source says what those report). ``HostCounts`` sums a host's frontend nodes per minute (each node's minute as
``increments``: its latency total is its own mean times its own operations, so the host's mean latency is weighted
by each node's operations) and integrates the sums per host as ``Counts`` does for the cluster, at scope ``host``,
named by the ``hostname`` (on the GPU nodes, lockstep's node label, so that the series meet the node's jobs).
Every host with frontend I/O is read, servers too: a backend's frontends serve what runs on the backend itself (a
local mount, a protocol gateway), which is I/O of the cluster's as well; ``lockstep_storage_system_host_info`` says
for each host whether ``hosts_list`` calls it a client or a server, so a query keeps the clients alone when it
wants them.

Per file system, only for a target with ``per_filesystem: true`` (a part of its own, as ``per_host``):
- ``stats_show`` of category ``fs_stats``, one call per stat (the same six), with ``param`` ``{"fS": "*"}`` (every
  file system), as WEKA's own exporter asks for its per-file-system statistics (README, fact 7). The answer is the
  cluster's (``all``), its minutes as for ``ops``, each stat keyed by its file system inside its name:
  ``"READS[fS: 1]"``, the id of ``FSId<1>`` in ``filesystems_get_capacity``, whose ``name`` names the series
  (scope ``filesystem``, as the capacity). An id ``filesystems_get_capacity`` does not list is skipped (WEKA's
  exporter notes the API may return ids of file systems that do not exist). The six answers come one after
  another, and a minute may end between two of them: only the minutes every answer holds are counted, the newer
  ones in a later poll. Each file system's minutes are integrated as the cluster's, by ``HostCounts``.
No source shows a cluster-wide call returning ``fs_stats`` per host (README, "Not known")."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Collection, Iterator, Mapping

from lockstep.exporters.catalog import storagesys as m
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.storagesys.errors import AnswerError
from lockstep.exporters.toolkit.sample import Sample

CATEGORY = "ops"
STATS = ("READS", "WRITES", "READ_BYTES", "WRITE_BYTES", "READ_LATENCY", "WRITE_LATENCY")
# Five one-minute buckets per answer (WEKA's exporter asks the same): minutes a failed poll missed are still in
# the next answer, if it comes within five minutes.
INTERVAL = "5m"
BUCKET_S = 60.0          # each bucket's values are per-second averages over one minute
_MICROSECONDS = 1e-6     # READ_LATENCY, WRITE_LATENCY
OPS = ("read", "write")


def stats_params() -> dict[str, object]:
    """The ``stats_show`` parameters: the cluster's total (no ``per_node``), stats named ``category.STAT``."""
    return {"stat": [f"{CATEGORY}.{stat}" for stat in STATS], "interval": INTERVAL}


@dataclass(frozen=True)
class Bucket:
    at: datetime                                   # the minute's timestamp, aware
    stats: Mapping[str, float] = field(default_factory=dict)   # the stats read, a null or invalid one left out


def _timestamp(value: object) -> datetime:
    if not isinstance(value, str):
        raise AnswerError(f"stats_show: a bucket's timestamp is {type(value).__name__}, not a string")
    try:
        at = datetime.fromisoformat(value)   # "2021-08-16T15:23:00Z": Python 3.11 reads the Z
    except ValueError:
        raise AnswerError(f"stats_show: timestamp {value[:40]!r} is not ISO 8601") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)   # no offset: UTC, as the request asks


def _number(value: object) -> float | None:
    """A finite number not below zero; None for anything else (null, a histogram's list), which is skipped."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def parse_stats(result: object) -> list[Bucket]:
    """A ``stats_show`` result (``{"all": {"ops": [{"stats": {...}, "timestamp": ...}, ...]}}``) as its buckets,
    oldest first, one per timestamp (a repeated one: the last wins). No ``ops`` list: no buckets (nothing counted)."""
    return _buckets(_cluster(result, "stats_show").get(CATEGORY))


def _cluster(result: object, call: str) -> dict:
    """The ``all`` object of a cluster-wide ``stats_show`` result (its categories)."""
    if not isinstance(result, dict) or not isinstance(result.get("all"), dict):
        raise AnswerError(f'{call}: no "all" object in the result')
    return result["all"]


def _buckets(items: object, after: datetime | None = None) -> list[Bucket]:
    """The items as buckets; one not after ``after`` keeps its minute but not its values (it would count nothing)."""
    if items is None:
        return []
    buckets: dict[datetime, Bucket] = {}
    for at, given in _stat_items(items, CATEGORY):
        if after is not None and at <= after:
            buckets[at] = Bucket(at)
            continue
        buckets[at] = Bucket(at, {name: v for name in STATS if (v := _number(given.get(name))) is not None})
    return [buckets[at] for at in sorted(buckets)]


def _stat_items(items: object, category: str) -> list[tuple[datetime, dict]]:
    """A ``stats_show`` category's items as (minute, stats), each checked."""
    if not isinstance(items, list):
        raise AnswerError(f'stats_show: "{category}" is not a list')
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("stats"), dict):
            raise AnswerError(f'stats_show: a "{category}" item without "stats"')
        out.append((_timestamp(item.get("timestamp")), item["stats"]))
    return out


def increments(bucket: Bucket) -> dict[tuple[Metric, str], float]:
    """What one minute adds to each counter, keyed (metric, op; "" for bytes): rates times 60 s, the latency as its
    mean times the operations (only where both are there)."""
    s, out = bucket.stats, {}
    for op in OPS:
        upper = op.upper()
        if f"{upper}_BYTES" in s:
            out[(m.READ_BYTES if op == "read" else m.WRITE_BYTES, "")] = s[f"{upper}_BYTES"] * BUCKET_S
        if f"{upper}S" in s:
            out[(m.OPERATIONS, op)] = s[f"{upper}S"] * BUCKET_S
            if f"{upper}_LATENCY" in s:
                out[(m.LATENCY, op)] = s[f"{upper}_LATENCY"] * _MICROSECONDS * s[f"{upper}S"] * BUCKET_S
    return out


Minute = tuple[datetime, dict[tuple[Metric, str], float]]   # a minute's timestamp and what it adds (``increments``)


class Counts:
    """One target's (or host's) integrated counters. The first answer with buckets counts only its newest: the
    counters start at zero with the exporter (a reset, as for any counter), and Prometheus counts a reset's first
    value whole, so any minute in it that an earlier run of the exporter had counted is counted twice; one minute at
    most, not five. Each later answer counts its buckets newer than the newest counted: a minute counts once, the
    minutes a failed poll missed are counted by the next answer that still holds them (within five minutes), and a
    counter never goes backwards (an answer whose minutes are all older adds nothing). ``newest`` given: counting
    starts after it (the first answer is then a later one)."""

    def __init__(self, newest: datetime | None = None) -> None:
        self.newest = newest
        self.totals: dict[tuple[Metric, str], float] = {}

    def add(self, buckets: list[Bucket]) -> None:
        self.add_minutes([(b.at, increments(b)) for b in buckets])

    def add_minutes(self, minutes: list[Minute]) -> None:
        """``minutes`` oldest first, as ``add``'s buckets."""
        if not minutes:
            return
        if self.newest is None:
            new = minutes[-1:]
        else:
            new = [minute for minute in minutes if minute[0] > self.newest]
        for _, added in new:
            for key, value in added.items():
                self.totals[key] = self.totals.get(key, 0.0) + value
        if new:
            self.newest = new[-1][0]

    def samples(self, target: str, scope: str = "cluster", name: str | None = None) -> Iterator[Sample]:
        """The counters counted so far (one never counted is absent, not zero), at ``scope`` (cluster: named by the
        target, as the answer names no cluster)."""
        key = (target, scope, target if name is None else name)
        for (metric, op), value in self.totals.items():
            yield Sample(metric, (*key, op) if op else key, value)


# ---- per host -----------------------------------------------------------------------------------------------------

FRONTEND = "FRONTEND"   # the role of the nodes whose ops are a client's I/O (see the module's docstring)
SERVER, CLIENT = "server", "client"   # a host's role, from hosts_list's mode (backend: server), as WEKA's exporter


def node_stats_params() -> dict[str, object]:
    """``stats_show`` per node: the cluster's six ``ops`` stats and interval, with ``per_node``, ``no_zeroes`` and
    ``show_internal`` as WEKA's exporter asks for them (all nodes in one call: no ``node_ids``)."""
    return {**stats_params(), "per_node": True, "no_zeroes": True, "show_internal": True}


def parse_node_stats(result: object, after: datetime | None = None) -> dict[str, list[Bucket]]:
    """A per-node ``stats_show`` result (``{"NodeId<k>": {"ops": [{"stats": {...}, "timestamp": ...}, ...]}, ...}``)
    as each node's buckets, oldest first; minutes not after ``after`` (``HostCounts.floor``: counted for every host)
    without their values. Nodes left out (``no_zeroes``: nothing but zeros) have none. An answer keyed ``all`` is the
    cluster's total: ``per_node`` was not honoured, refused rather than read as a node."""
    if not isinstance(result, dict):
        raise AnswerError("stats_show per node: the result is not an object")
    if "all" in result:
        raise AnswerError('stats_show per node: the answer is the cluster\'s total ("all"), not per node')
    out: dict[str, list[Bucket]] = {}
    for node, categories in result.items():
        if not isinstance(categories, dict):
            raise AnswerError("stats_show per node: a node's value is not an object")
        out[node] = _buckets(categories.get(CATEGORY), after)
    return out


@dataclass(frozen=True)
class NodeMap:
    """What ``nodes_list`` says: each FRONTEND node's host, and every node id it knows (a known node that is not a
    frontend is skipped; an unknown one asks for the lists again)."""

    frontend: Mapping[str, str] = field(default_factory=dict)   # node id -> hostname
    known: frozenset[str] = frozenset()


def _roles(value: object) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset((value,))
    if isinstance(value, list):
        return frozenset(r for r in value if isinstance(r, str))
    return frozenset()


def parse_nodes(result: object) -> NodeMap:
    """A ``nodes_list`` result (``{"NodeId<k>": {"hostname": ..., "roles": [...]}, ...}``, keyed as the per-node
    stats are) as a ``NodeMap``. ``roles`` a list (one node may have several) or a single name; a node without a
    hostname is known but mapped to no host."""
    if not isinstance(result, dict):
        raise AnswerError("nodes_list: the result is not an object")
    frontend = {}
    for node_id, node in result.items():
        if isinstance(node, dict) and isinstance(node.get("hostname"), str) and node["hostname"] \
                and FRONTEND in _roles(node.get("roles")):
            frontend[node_id] = node["hostname"]
    return NodeMap(frontend, frozenset(result))


def parse_hosts(result: object) -> dict[str, str]:
    """A ``hosts_list`` result (an object of hosts, or a list) as hostname -> ``server`` (``mode`` ``backend``) or
    ``client`` (any other mode). A hostname listed more than once (several containers on one host) is a server if
    any of its entries is a backend; an entry without a hostname or a mode is left out."""
    if isinstance(result, dict):
        hosts = list(result.values())
    elif isinstance(result, list):
        hosts = result
    else:
        raise AnswerError("hosts_list: the result is neither an object nor a list")
    roles: dict[str, str] = {}
    for host in hosts:
        if not isinstance(host, dict) or not isinstance(host.get("hostname"), str) or not host["hostname"] \
                or not isinstance(host.get("mode"), str):
            continue
        name = host["hostname"]
        roles[name] = SERVER if host["mode"] == "backend" or roles.get(name) == SERVER else CLIENT
    return roles


def host_minutes(nodes: Mapping[str, list[Bucket]], frontend: Mapping[str, str],
                 counted: Mapping[str, datetime | None] | None = None,
                 otherwise: datetime | None = None) -> dict[str, list[Minute]]:
    """Each host's minutes, oldest first: per minute the sum of its FRONTEND nodes' ``increments`` (a node not in
    ``frontend``, not a frontend or unknown, is skipped). Minutes not after a host's ``counted`` one (``otherwise``
    for a host not in it; None: none) are left out: they would add nothing, and an answer repeats most of its
    minutes from poll to poll (five per answer, one new a minute)."""
    out: dict[str, dict[datetime, dict[tuple[Metric, str], float]]] = {}
    counted = counted or {}
    for node, buckets in nodes.items():
        host = frontend.get(node)
        if host is None:
            continue
        after = counted.get(host, otherwise)
        for bucket in buckets:
            if after is not None and bucket.at <= after:
                continue
            minute = out.setdefault(host, {}).setdefault(bucket.at, {})
            for key, value in increments(bucket).items():
                minute[key] = minute.get(key, 0.0) + value
    return {host: sorted(minutes.items(), key=lambda m: m[0]) for host, minutes in out.items()}


class HostCounts:
    """One target's counters per host (or per file system: ``add`` maps the answer's keys to names, hosts or file
    systems alike): a ``Counts`` per host, fed its minutes. The first answer with buckets counts
    only its newest minute, for every host (as the cluster's). A host first seen in a later answer counts its minutes
    newer than the newest of the earlier answers: ``no_zeroes`` leaves a host out of an answer while its frontends
    do nothing, so its first minutes of I/O after that come in an answer of their own, and counting only their
    newest would lose the others; the minutes before, it was idle in (or not yet a client)."""

    def __init__(self) -> None:
        self.hosts: dict[str, Counts] = {}
        self.seen: datetime | None = None   # the newest minute of any answer so far (any node)

    def add(self, nodes: Mapping[str, list[Bucket]], frontend: Mapping[str, str]) -> None:
        newest = max((buckets[-1].at for buckets in nodes.values() if buckets), default=None)
        if newest is None:
            return
        counted = {host: counts.newest for host, counts in self.hosts.items()}
        for host, minutes in host_minutes(nodes, frontend, counted, self.seen).items():
            counts = self.hosts.get(host)
            if counts is None:
                if self.seen is None:   # the first answer: its newest minute only
                    minutes = [m for m in minutes if m[0] >= newest]
                    counts = Counts(None if minutes else newest)
                else:
                    counts = Counts(self.seen)
                self.hosts[host] = counts
            counts.add_minutes(minutes)
        self.seen = newest if self.seen is None else max(self.seen, newest)

    def keep(self, names: Collection[str]) -> None:
        """Forget the hosts (file systems) not in ``names``: one WEKA no longer lists (a client taken out, a file
        system deleted) loses its series rather than serving its last counters for ever; should it come back, it
        counts anew from the newest minute seen (a counter reset, after its series had ended)."""
        for host in [h for h in self.hosts if h not in names]:
            del self.hosts[host]

    def floor(self) -> datetime | None:
        """The newest minute no host can count any more (each host's newest counted, and for a host not seen yet the
        newest of any answer); None while any host could still count any minute."""
        if self.seen is None or any(counts.newest is None for counts in self.hosts.values()):
            return None
        return min((counts.newest for counts in self.hosts.values()), default=self.seen)

    def samples(self, target: str, roles: Mapping[str, str], scope: str = m.HOST_SCOPE) -> Iterator[Sample]:
        """Each host's counters at ``scope`` (``host``; ``filesystem`` where the "hosts" are file systems) named by
        its hostname, and its role (``host_info``) where ``hosts_list`` names the host."""
        for host in sorted(self.hosts):
            if not self.hosts[host].totals:
                continue   # nothing counted yet
            yield from self.hosts[host].samples(target, scope, host)
            if host in roles:
                yield Sample(m.HOST_INFO, (target, host, roles[host]), 1.0)


def parse_capacity(target: str, result: object) -> list[Sample]:
    """A ``filesystems_get_capacity`` result (``{"FSId<n>": {"name", "used_total", "available_total", ...}}``) as
    ``used_bytes`` and ``capacity_bytes`` per file system; an entry without a name, or a null size, is left out."""
    if not isinstance(result, dict):
        raise AnswerError("filesystems_get_capacity: the result is not an object")
    found: dict[str, list[Sample]] = {}
    for fs in result.values():
        if not isinstance(fs, dict) or not isinstance(fs.get("name"), str) or not fs["name"]:
            continue
        key = (target, "filesystem", fs["name"])
        found[fs["name"]] = [Sample(metric, key, value) for metric, field_ in ((m.USED, "used_total"),
                                                                               (m.CAPACITY, "available_total"))
                             if (value := _number(fs.get(field_))) is not None]
    return [s for name in sorted(found) for s in found[name]]


# ---- per file system ----------------------------------------------------------------------------------------------

FS_CATEGORY = "fs_stats"
FILESYSTEM_SCOPE = "filesystem"
# "READS[fS: 1]": the stat, and the id of the file system (FSId<1>); WEKA's exporter reads the id after the colon
_FS_KEY = re.compile(r"([A-Z_]+)\[fS:\s*(\d+)\]")
_FS_ID = re.compile(r"FSId<(\d+)>")


def fs_stats_params(stat: str) -> dict[str, object]:
    """``stats_show`` of one stat for every file system, as WEKA's exporter asks (``category``, ``stat``, ``param``),
    over the cluster's interval."""
    return {"category": FS_CATEGORY, "stat": stat, "interval": INTERVAL, "param": {"fS": "*"}}


def filesystem_names(result: object) -> dict[str, str]:
    """A ``filesystems_get_capacity`` result as file system id (the number in ``FSId<n>``) -> name; an entry without
    a name is left out."""
    if not isinstance(result, dict):
        raise AnswerError("filesystems_get_capacity: the result is not an object")
    return {match.group(1): fs["name"] for key, fs in result.items()
            if (match := _FS_ID.fullmatch(str(key))) and isinstance(fs, dict) and isinstance(fs.get("name"), str)
            and fs["name"]}


def parse_fs_stats(results: Mapping[str, object], after: datetime | None = None) -> dict[str, list[Bucket]]:
    """The answers of ``stats_show`` of category ``fs_stats``, one per stat (``{"all": {"fs_stats": [{"stats":
    {"READS[fS: 1]": ...}, "timestamp": ...}, ...]}}``, keyed by the stat asked), as each file system's buckets (by
    id), oldest first. Only the minutes up to the oldest of the answers' newest are kept (a minute one answer does not
    hold yet is counted once they all do); minutes not after ``after`` keep no values (``HostCounts.floor``). A key of
    another stat than the one asked, or not of the form ``STAT[fS: n]``, is skipped; no ``fs_stats`` list: nothing
    for that stat."""
    minutes: dict[str, dict[datetime, dict[str, float]]] = {}
    newest: list[datetime] = []
    for stat, result in results.items():
        items = _cluster(result, f"stats_show {FS_CATEGORY} {stat}").get(FS_CATEGORY)
        if items is None:
            continue
        times = []
        for at, given in _stat_items(items, FS_CATEGORY):
            times.append(at)
            for key, value in given.items():
                match = _FS_KEY.fullmatch(str(key))
                if match is None or match.group(1) != stat:
                    continue
                bucket = minutes.setdefault(match.group(2), {}).setdefault(at, {})
                if (after is None or at > after) and (number := _number(value)) is not None:
                    bucket[stat] = number
        if times:
            newest.append(max(times))
    last = min(newest, default=None)
    return {fs: [Bucket(at, stats) for at, stats in sorted(by_minute.items()) if at <= last]
            for fs, by_minute in minutes.items() if last is not None}
