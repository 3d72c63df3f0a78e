"""The words of a configuration file's broken shape: the file, the line, the key, and a did-you-mean.

`shape_error` turns what pydantic found wrong in a file (tokenledger.config.models) into the one message a user
reads: the first problem in the order the file is read (a mapping's keys before what is inside them, entries in
the order they are written), worded as tokenledger always worded it. The helpers below it (`_require_mapping`,
`_require_list`, `_check_keys`) say the same things for the files that are still checked by hand (a load test's
run.yaml, tokenledger.capacity.loadtest).
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Discriminator, Tag, ValidationError

from tokenledger.config.schema import ConfigModel, Shape, container_kind, strip
from tokenledger.config.source import _line, _Mapping
from tokenledger.errors import ConfigError


def mapping_message(path: Path, line: int, what: str, obj: Any) -> str:
    found = "nothing" if obj is None else f"a {type(obj).__name__}"
    return f"{path} line {line}: {what} must be a mapping, found {found}. Formats: docs/configuration.md."


def list_message(path: Path, line: int, what: str, obj: Any) -> str:
    return f"{path} line {line}: {what} must be a list, found {type(obj).__name__}."


def unknown_key_message(path: Path, line: int, key: Any, what: str, known: set[str]) -> str:
    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.75)
    if close:
        return (f"{path} line {line}: unknown key {key!r} in {what}: did you mean {close[0]!r}? "
                "(docs/configuration.md)")
    return (f"{path} line {line}: unknown key {key!r} in {what} (known keys: {', '.join(sorted(known))}). "
            "Check the spelling (docs/configuration.md).")


def _require_mapping(obj: Any, path: Path, what: str, line: int = 0) -> _Mapping:
    if not isinstance(obj, dict):
        raise ConfigError(mapping_message(path, line or _line(obj), what, obj))
    return obj  # type: ignore[return-value]


def _require_list(obj: Any, path: Path, what: str, line: int) -> list[Any]:
    if not isinstance(obj, list):
        raise ConfigError(list_message(path, line, what, obj))
    return obj


def _check_keys(obj: dict[str, Any], known: set[str], path: Path, what: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        line = obj.line_of(unknown[0]) if isinstance(obj, _Mapping) else _line(obj)
        raise ConfigError(unknown_key_message(path, line, unknown[0], what, known))


# --- pydantic's findings, worded ---------------------------------------------------------------------------------

@dataclass
class _Step:
    """One step of an error's location in the file: a key of an entry, an entry of a mapping or a list."""

    key: Any
    holder: Any  # the YAML value the key is in
    value: Any  # the YAML value at the key (None when it is not written)
    shape: Shape | None  # a key's own shape, or for an entry the shape of the list or mapping holding it
    entry: bool  # an entry of a list or mapping (else a key of a model)
    rank: tuple[Any, ...]


@dataclass
class _Where:
    """Where an error is: the steps to it, the model it is in (or at), and the name of the nearest named entry."""

    steps: list[_Step]
    model: type[ConfigModel]
    name: Any
    unknown_key: bool  # the last step is a key the model does not have


def _raw_key(raw: Any, key: Any) -> Any:
    """The key of the YAML mapping `raw` that pydantic's location names `key` (which gives null as 'None')."""
    if not isinstance(raw, dict) or key in raw:
        return key
    return next((k for k in raw if str(k) == str(key)), key)


def _key_order(model: type[ConfigModel], key: str) -> int:
    order = [*model.check_order, *(k for k in model.model_fields if k not in model.check_order)]
    return order.index(key)


def _walk(file_model: type[ConfigModel], doc: Any, loc: tuple[Any, ...]) -> _Where:
    """Follow `loc` (pydantic's location of an error) through the file's models and its YAML values at once."""
    tp: Any = file_model
    model, raw, name = file_model, doc, None
    steps: list[_Step] = []
    shape: Shape | None = None
    items = list(loc)
    while items:
        tp, metadata = strip(tp)
        discriminator = next((m for m in metadata if isinstance(m, Discriminator)), None)
        if discriminator is not None:  # a tagged union (a price sheet): the tag is not a key of the file
            tag = items.pop(0)
            tp = next(a for a in typing.get_args(tp) if any(
                isinstance(m, Tag) and m.tag == tag for m in strip(a)[1]))
            continue
        key = _raw_key(raw, items.pop(0))
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            model = tp
            field = tp.model_fields.get(key) if isinstance(key, str) else None
            value = raw.get(key) if isinstance(raw, dict) else None
            if field is None:  # an unknown key (or one that is not a string): the error is the model's
                steps.append(_Step(key, raw, value, None, False, (0, str(key))))
                return _Where(steps, model, name, True)
            shape = next((m for m in field.metadata if isinstance(m, Shape)), None)
            phase = 1 if model.shapes_first and items else 0  # (the error is inside the key's value)
            steps.append(_Step(key, raw, value, shape, False, (1, phase, _key_order(tp, key))))
            tp, raw = field.annotation, value
            continue
        container = container_kind(tp)
        value = raw.get(key) if isinstance(raw, dict) else (
            raw[key] if isinstance(raw, list) and isinstance(key, int) and key < len(raw) else None)
        if container == "mapping":
            name = key
            position = list(raw).index(key) if isinstance(raw, dict) and key in raw else 0
            steps.append(_Step(key, raw, value, shape, True, (position,)))
        else:
            steps.append(_Step(key, raw, value, shape, True, (key,)))
        tp, raw = typing.get_args(tp)[-1], value
    return _Where(steps, model, name, False)


def _named(text: str, name: Any) -> str:
    return text.replace("{name}", str(name))


def _line_of(rule: str, step: _Step, container: _Step | None) -> int:
    """The line `rule` (Shape.line or Shape.item_line) points at for the value at `step`."""
    if rule == "file":
        return 1
    if step.entry and container is not None:
        if rule == "container":
            return _line(container.value)
        if rule == "entry":
            return container.value.line_of(step.key) if isinstance(container.value, _Mapping) else 0
        step = container
    if rule == "key":
        return step.holder.line_of(step.key) if isinstance(step.holder, _Mapping) else _line(step.holder)
    return _line(step.holder)


def _message(error: dict[str, Any], where: _Where, path: Path) -> str:
    kind = error["type"]
    if where.unknown_key:
        step = where.steps[-1]
        holder = step.holder
        line = holder.line_of(step.key) if isinstance(holder, _Mapping) else _line(holder)
        return unknown_key_message(path, line, step.key, _named(where.model.what, where.name),
                                   set(where.model.model_fields))
    if kind == "config_rule":
        context = error["ctx"]
        return f"{path} line {context['line']}: {_named(context['text'], where.name)}"
    if not where.steps:  # the file itself
        what, line, shape_kind = "the file", 1, "mapping"
    else:
        step = where.steps[-1]
        container = where.steps[-2] if step.entry and len(where.steps) > 1 else None
        shape = step.shape or Shape(str(step.key))
        what = _named(shape.item if step.entry and shape.item else shape.what, where.name)
        line = _line_of(shape.item_line if step.entry else shape.line, step, container)
        shape_kind = "list" if kind in ("config_list", "list_type") or (
            kind == "missing" and _expects_list(where)) else "mapping"
    found = None if kind == "missing" else error.get("input")
    if shape_kind == "list":
        return list_message(path, line, what, found)
    return mapping_message(path, line, what, found)


def _expects_list(where: _Where) -> bool:
    field = where.model.model_fields[where.steps[-1].key]
    return container_kind(field.annotation) == "list"


def shape_error(exc: ValidationError, file_model: type[ConfigModel], doc: Any, path: Path) -> ConfigError:
    """The ConfigError of the first problem pydantic found in the file `path` read as `file_model`."""
    found = []
    for error in exc.errors(include_url=False):
        where = _walk(file_model, doc, tuple(error["loc"]))
        rank = tuple(step.rank for step in where.steps) + ((2,) if error["type"] == "config_rule" else ())
        found.append((rank, error, where))
    _, error, where = min(found, key=lambda f: f[0])
    return ConfigError(_message(error, where, path))


def read_file(file_model: type[ConfigModel], doc: Any, path: Path) -> ConfigModel:
    """The YAML document `doc` of the file `path` as `file_model`, or the ConfigError of its first problem."""
    try:
        return file_model.model_validate(doc)
    except ValidationError as exc:
        raise shape_error(exc, file_model, doc, path) from None
