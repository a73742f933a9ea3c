"""Reading a YAML document with the line of each of its keys, so that problems can be reported at
the line of the option they concern. PyYAML's safe loader, refusing duplicate keys; every failure
is a `ConfigError` naming the file (and the line and column of a syntax error)."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from armd.config.schema import Loc
from armd.errors import ConfigError

__all__ = ["read_yaml"]


class _Loader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys (PyYAML would silently keep the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {seen[key]})",
                    key_node.start_mark,
                )
            if isinstance(key, Hashable):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> tuple[dict[str, object], dict[Loc, int]]:
    """The document at `path` and the line of each of its keys, by path. Raises `ConfigError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        context = f" ({exc.context}" if exc.context else ""
        if context and exc.context_mark is not None and exc.context_mark is not mark:
            context += f" at line {exc.context_mark.line + 1}"
        context += ")" if context else ""
        raise ConfigError(f"{where}: invalid YAML: {exc.problem}{context}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    finally:
        loader.dispose()
    if node is None or not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{path}: the top level must be a mapping of options, got {got}")
    lines: dict[Loc, int] = {}
    _key_lines(node, (), lines)
    return data, lines


def _key_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[(*loc, str(key.value))] = key.start_mark.line + 1
                _key_lines(value, (*loc, str(key.value)), lines)
