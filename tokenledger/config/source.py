"""Reading a configuration file: YAML with the line of every mapping and key, aliases bounded, keys written once.

What the file's entries mean and which keys they take is tokenledger.config.models' business; this module only
turns text into Python values that remember where they were written, so that every message can name a line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from tokenledger.errors import ConfigError


class _Mapping(dict):
    """A YAML mapping that remembers the line it started on and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return getattr(self, "key_lines", {}).get(key, self.line)


class _TooManyNodes(Exception):
    """Raised while composing, at the first node over MAX_EXPANDED_NODES: the line it is on."""

    def __init__(self, line: int) -> None:
        self.line = line


class _LineLoader(yaml.SafeLoader):
    composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        # Counted as they are read, so that a file of millions of small entries stops at the bound instead of being
        # built whole first (an alias counts once here; what it expands to is bounded after, by _expanded_nodes).
        self.composed += 1
        if self.composed > MAX_EXPANDED_NODES:
            raise _TooManyNodes(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> _Mapping:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:  # before merges (<<) are flattened in: only keys written here
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} appears twice in one mapping (lines "
                        f"{seen[key_node.value]} and {line}); only one can be meant", key_node.start_mark)
                seen[key_node.value] = line
        mapping = _Mapping(super().construct_mapping(node, deep=True))
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                mapping.key_lines[key_node.value] = key_node.start_mark.line + 1
        return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping)


# A configuration file is a few hundred entries. YAML aliases let a few kilobytes stand for billions of nodes
# (each alias repeats a whole subtree, and aliases nest): the expanded document is bounded before it is built.
MAX_EXPANDED_NODES = 100_000
# And a file is read only up to this size (its comments included): a larger one is refused before it is parsed.
MAX_CONFIG_BYTES = 8 * 1024 * 1024


def _expanded_nodes(root: yaml.Node, path: Path) -> int:
    """How many nodes the document has once every alias is expanded (an alias counts its whole subtree)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done:
            on_path.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError(f"{path} line {node.start_mark.line + 1}: an alias refers to a node that contains "
                              "it, so the document never ends. Write the entry out, then re-run.")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, turning a syntax error into a message with the file, line and column.

    Aliases are allowed (`<<: *base` is a common way to write versions), but the document they expand to is
    bounded by MAX_EXPANDED_NODES before anything is built, so a few kilobytes of nested aliases cannot exhaust
    memory. A key written twice in one mapping is an error rather than a silent overwrite.
    """
    if not path.is_file():
        raise ConfigError(f"{path} is missing (formats: docs/configuration.md).")
    with path.open("rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)  # never more than the bound, whatever the file's size
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is over {MAX_CONFIG_BYTES:,} bytes (a configuration is a few hundred entries, "
                          "kilobytes), so it is refused unread: keep only the entries tokenledger reads in it, then "
                          "re-run.")
    try:
        loader = _LineLoader(raw.decode("utf-8"))
        try:
            try:
                node = loader.get_single_node()
            except _TooManyNodes as over:
                raise ConfigError(
                    f"{path}: more than {MAX_EXPANDED_NODES:,} YAML nodes by line {over.line:,} (a configuration "
                    "has a few thousand at most), so it is refused unread: keep only the entries tokenledger reads "
                    "in it, then re-run.") from None
            if node is None:
                return None
            expanded = _expanded_nodes(node, path)
            if expanded > MAX_EXPANDED_NODES:
                raise ConfigError(
                    f"{path}: its YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (a configuration "
                    "has a few thousand at most), so it is refused unread. Write the entries out without nested "
                    "aliases, then re-run.")
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path} is not valid YAML{where}: {problem}. Fix the file and re-run.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason}). Save it as UTF-8 and re-run.") from None


def _line(obj: Any, fallback: int = 0) -> int:
    """The line a mapping of the file starts on (`fallback` for anything that is not one)."""
    return getattr(obj, "line", fallback)


def _text(value: Any) -> str | None:
    """The text form the contract SQL types from: dates in ISO 8601, lists as JSON, booleans lower-case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)


@dataclass
class _Rows:
    """Rows of one contract table in text form, each with the file and line it came from."""

    table: str
    path: Path
    rows: list[dict[str, str | None]]
    lines: list[int]
    sources: list[tuple[_Mapping, ...]] = field(default_factory=list)

    def add(self, line: int, *sources: _Mapping, **values: Any) -> None:
        """Add a row; `sources` are the YAML mappings its fields came from, most specific first."""
        self.rows.append({k: _text(v) for k, v in values.items()})
        self.lines.append(line)
        self.sources.append(sources)

    def field_line(self, index: int, field_name: str) -> int:
        """The line of `field_name` in the row's YAML, or the row's own line when it is not written there."""
        for source in self.sources[index]:
            if field_name in getattr(source, "key_lines", {}):
                return source.key_lines[field_name]
        return self.lines[index]
