"""YAML configuration files that report errors by file, line and key.

Every config lockstep reads (web config, power exporter targets, scenarios, alert thresholds) goes
through ``load_yaml`` and ``Section`` so a broken file is rejected with ``FILE:LINE: key: reason``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

_REQUIRED = object()
# Aliases let a few hundred bytes of YAML stand for billions of nodes ("billion laughs": nine anchors,
# each a list of nine aliases of the one before). PyYAML builds an anchored value once and shares it,
# so loading stays cheap, but whatever walks the value pays for the whole expansion: the repr in an
# error message, a copy, a check of every item. So a value may expand to at most this many nodes, or
# EXPANSION_RATIO times the nodes the file itself holds where that is more (a large config that shares
# a block among its entries with ``<<: *defaults``).
MAX_EXPANDED_NODES = 100_000
EXPANSION_RATIO = 10
PREVIEW_CHARS = 60  # of a value quoted in an error message


class ConfigError(ValueError):
    """A configuration problem, located by file, line and dotted key."""

    def __init__(self, file: str | Path, line: int | None, key: str, reason: str) -> None:
        self.file, self.line, self.key, self.reason = str(file), line, key, reason
        where = f"{self.file}:{line}" if line else self.file
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


class LineDict(dict):
    """A mapping that remembers the line of each key (1-based)."""

    line: int = 0
    lines: dict[Any, int]


class _Loader(yaml.SafeLoader):
    """The safe loader, counting as it composes each node's size with its aliases expanded (each size
    from its children's, known already: work in proportion to the text, never to the expansion)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.expanded: dict[yaml.Node, int] = {}
        self.literal = 0  # nodes written in the text
        self.path: list[str] = []  # keys and list positions down to the node being composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            anchored = self.anchors.get(event.anchor)
            if anchored is not None and anchored not in self.expanded:
                raise ConfigError(self.name, event.start_mark.line + 1, self._key(index),
                                  f"alias *{event.anchor} refers to a value that contains it")
            return super().compose_node(parent, index)
        self.path.append(_step(index))
        node = super().compose_node(parent, index)
        self.path.pop()
        self.literal += 1
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self.expanded[child] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self.expanded[k] + self.expanded[v] for k, v in node.value)
        else:
            size = 1
        self.expanded[node] = size
        limit = max(MAX_EXPANDED_NODES, EXPANSION_RATIO * self.literal)
        if size > limit:
            raise ConfigError(self.name, node.start_mark.line + 1, self._key(index),
                              f"aliases expand this value to more than {limit} YAML nodes; write it out instead")
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """A scalar Python cannot hold (a date past the calendar, an integer of more digits than
        ``int()`` converts) is an error at its line, not a ValueError from deep inside PyYAML."""
        try:
            return super().construct_object(node, deep)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(self.name, node.start_mark.line + 1, "", f"invalid value: {exc}") from None

    def _key(self, index: Any) -> str:
        """The dotted key of the node composed under ``index`` (``targets[0].url``), as Section names it."""
        return "".join(s if s.startswith("[") or i == 0 else "." + s
                       for i, s in enumerate(p for p in self.path + [_step(index)] if p))


def _step(index: Any) -> str:
    """What PyYAML composes a node under: a mapping's key node, a list position, or None (a key, the root)."""
    if isinstance(index, yaml.ScalarNode):
        return str(index.value)[:PREVIEW_CHARS]
    return f"[{index}]" if isinstance(index, int) else ""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line, result.lines = node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise ConfigError(loader.name, key_node.start_mark.line + 1, "", "a key must be a scalar, not a "
                              f"{type(key).__name__}") from None
        if key in result:
            raise ConfigError(loader.name, key_node.start_mark.line + 1, str(key), "duplicate key")
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = key_node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file; syntax errors and unreadable files become ``ConfigError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror or exc}") from None
    return loads_yaml(text, path)


def loads_yaml(text: str, path: str | Path = "<string>") -> Any:
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, most control characters)
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(path, line, "", f"invalid YAML: {str(exc).splitlines()[0]}") from None
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(path, mark.line + 1 if mark else None, "", f"invalid YAML: {exc.problem}") from None
    except RecursionError:
        raise ConfigError(path, None, "", "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


class Section:
    """Typed, strict access to one mapping of a config file; unknown keys are errors."""

    def __init__(self, data: Any, file: str | Path, key: str = "", line: int | None = None) -> None:
        self.file, self.key = str(file), key
        if not isinstance(data, dict):
            raise ConfigError(file, line or getattr(data, "line", None), key or "(top level)",
                              f"must be a mapping, got {type(data).__name__}")
        self.data = data
        self.line = getattr(data, "line", line)
        self._seen: set[Any] = set()

    def _path(self, key: str) -> str:
        return f"{self.key}.{key}" if self.key else key

    def line_of(self, key: str) -> int | None:
        return getattr(self.data, "lines", {}).get(key, self.line)

    def error(self, key: str, reason: str) -> ConfigError:
        return ConfigError(self.file, self.line_of(key), self._path(key), reason)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = _REQUIRED,
            check: Callable[[Any], str | None] | None = None) -> Any:
        """Return ``data[key]`` checked against ``kind``; ``check`` returns an error text or None."""
        self._seen.add(key)
        if key not in self.data or self.data[key] is None:
            if default is _REQUIRED:
                raise ConfigError(self.file, self.line, self._path(key), "required key is missing")
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise self.error(key, f"must be {names}, got {type(value).__name__} {preview(value)}")
        if check is not None and (problem := check(value)):
            raise self.error(key, problem)
        return value

    def section(self, key: str, default: Any = _REQUIRED) -> "Section | None":
        value = self.get(key, dict, default)
        if value is None:
            return None
        return Section(value, self.file, self._path(key), self.line_of(key))

    def sections(self, key: str) -> Iterator["Section"]:
        """Each mapping of the list under ``key``, addressed as ``key[i]``."""
        for i, item in enumerate(self.get(key, list, [])):
            yield Section(item, self.file, f"{self._path(key)}[{i}]", self.line_of(key))

    def finish(self) -> None:
        """Reject keys nobody asked for (typos must not pass silently)."""
        unknown = [k for k in self.data if k not in self._seen]
        if unknown:
            raise self.error(unknown[0], f"unknown key (expected one of: {', '.join(sorted(map(str, self._seen)))})")


def positive(value: float) -> str | None:
    return None if value > 0 else "must be > 0"


def one_of(*choices: str) -> Callable[[str], str | None]:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}, got {preview(value)}"


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (then ``...``), built piece by piece: quoting a value
    costs ``limit`` characters of work, however large the value is once its aliases are expanded."""
    out: list[str] = []
    room = limit

    def put(text: str) -> bool:  # True once the room is spent
        nonlocal room
        out.append(text[:max(room, 0)])
        room -= len(text)
        return room < 0

    def walk(item: Any) -> bool:  # each level puts a bracket first, so the depth is bounded by ``limit``
        if isinstance(item, dict):
            pairs = ((k, v) for k, v in item.items())
            return put("{") or any((i and put(", ")) or walk(k) or put(": ") or walk(v)
                                   for i, (k, v) in enumerate(pairs)) or put("}")
        if isinstance(item, (list, tuple)):
            opening, closing = ("[", "]") if isinstance(item, list) else ("(", ")")
            return put(opening) or any((i and put(", ")) or walk(v) for i, v in enumerate(item)) or put(closing)
        return put(repr(item[:limit + 1] if isinstance(item, str) else item))

    return "".join(out) + "..." if walk(value) else "".join(out)
