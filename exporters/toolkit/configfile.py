"""YAML configuration files that report errors by file, line and key.

Every config lockstep reads (web config, power exporter targets, scenarios, alert thresholds) goes
through ``load_yaml`` and ``Section`` so a broken file is rejected with ``FILE:LINE: key: reason``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

_REQUIRED = object()


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
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line, result.lines = node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
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
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(path, mark.line + 1 if mark else None, "", f"invalid YAML: {exc.problem}") from None
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
            raise self.error(key, f"must be {names}, got {type(value).__name__} {value!r}")
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
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"
