"""The building blocks of the configuration models (tokenledger.config.models): a base model that remembers the
YAML it was read from, leaf values judged by the data contracts, and the shape of lists and mappings of entries.

Two things check a configuration file, each once:

- the models check its **shape**: which keys a mapping takes (an unknown key is refused, with a did-you-mean),
  which values are mappings or lists of entries, and the few rules across keys that no table can say (a price
  rate that names no tier). A broken shape stops the run with the message tokenledger.config.messages words;
- the **values** of the leaf keys (types, ranges, allowed values, required, and the rules across rows such as
  versions that overlap) are judged by the contract of the table the file is flattened into
  (data_contracts/config/*.odcs.yaml), in DuckDB, by the same SQL that guards every input.

So a leaf is declared with the type it has once the contract typed it (`Value[int]`), but the model passes the
value on as written: the contract, not pydantic, says whether `gpus: "8"` is an integer, in the words every
other input's errors use.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, PrivateAttr, SkipValidation, model_validator
from pydantic_core import PydanticCustomError, core_schema

from tokenledger.config.source import _line, _Mapping

T = TypeVar("T")

# A leaf key: passed on as written, typed and judged by its contract column (see the module's docstring).
Value = Annotated[T, SkipValidation()]


@dataclass(frozen=True)
class Column:
    """The contract column a leaf key is flattened into, when it is not the key's own name (or None: no column)."""

    name: str | None


@dataclass(frozen=True)
class Shape:
    """A key whose value is an entry (a model), a list of entries or a mapping of named entries.

    `what` names the value in a message ("list_prices", "the rates of {name}": {name} is the name of the nearest
    named entry around it, e.g. the price sheet), and `line` says which line the message points at: `parent` (the
    line the mapping holding the key starts on), `key` (the key's own line) or `file` (line 1). `item` and
    `item_line` do the same for one entry of a list or mapping, where `line` may also be `container` (the line the
    mapping of entries starts on) or `entry` (the entry's own key). `keys` says what the names of a mapping's
    entries are, for the docs.

    `empty` says how a value that is not written reads: `falsy` (a missing, null or empty value is an empty one,
    as `x or {}` reads it), `null-kept` (null stays null, another empty value is empty) or None (as written).
    `item_empty` does the same for each entry of a mapping.
    """

    what: str
    line: str = "parent"
    item: str | None = None
    item_line: str = "parent"
    keys: str | None = None
    empty: str | None = None
    item_empty: str | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        schema = handler(source)
        container = container_kind(source)
        return core_schema.no_info_before_validator_function(lambda value: self.read(value, container), schema)

    def read(self, value: Any, container: str | None) -> Any:
        """The value as the model reads it: empty values filled in, and a list or mapping of entries checked to be
        one (pydantic would take a set for a list)."""
        if self.empty == "null-kept" and value is None:
            return None
        if self.empty in ("falsy", "null-kept") and not value:
            value = [] if container == "list" else _Mapping()
        if container == "list" and not isinstance(value, list):
            raise PydanticCustomError("config_list", "not a list")
        if container == "mapping":
            if not isinstance(value, dict):
                raise PydanticCustomError("config_mapping", "not a mapping")
            if self.item_empty == "falsy" and not all(value.values()):
                filled = _Mapping({k: v or _Mapping() for k, v in value.items()})
                filled.line, filled.key_lines = _line(value), getattr(value, "key_lines", {})
                value = filled
        return value


def container_kind(tp: Any) -> str | None:
    """`list` or `mapping` for a list or dict type (under Annotated and Optional), else None."""
    tp = strip(tp)[0]
    origin = getattr(tp, "__origin__", None)
    if origin is list:
        return "list"
    if origin is dict:
        return "mapping"
    return None


def strip(tp: Any) -> tuple[Any, list[Any]]:
    """`tp` without Annotated and Optional around it, and the Annotated metadata found on the way."""
    metadata: list[Any] = []
    while True:
        if typing.get_origin(tp) is Annotated:
            metadata.extend(tp.__metadata__)
            tp = tp.__origin__
            continue
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp, metadata


def rule_broken(text: str, line: int) -> PydanticCustomError:
    """The error of a rule across keys that a model checks: `text` (with {name} for the entry's name) at `line`."""
    return PydanticCustomError("config_rule", "{text}", {"text": text, "line": line})


class ConfigModel(BaseModel):
    """A mapping of a configuration file. Unknown keys are refused; the YAML mapping it was read from is kept
    (`source`), so that rows and messages can name the line of each key.

    `what` names the mapping in a message about its keys ({name}: the name of the nearest named entry around it).
    `contract` is the contract table its leaf keys are flattened into (`config/slo_policy`), by their own names
    unless a `Column` says otherwise or `column_prefix` is put before them. `check_order`, when given, is the order
    its keys are checked in when it is not the order they are declared (and documented) in.
    """

    # Built when a file is first read, not when the definitions import this module (a code server's start).
    model_config = ConfigDict(extra="forbid", defer_build=True)

    what: ClassVar[str] = "an entry"
    contract: ClassVar[str | None] = None
    column_prefix: ClassVar[str] = ""
    check_order: ClassVar[tuple[str, ...]] = ()
    # The order of a message about the keys it holds: the shape of each of them first, then what is inside them
    # (an SLO version checks its default and its models are mappings before it reads either).
    shapes_first: ClassVar[bool] = False

    _source: Any = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _read(cls, data: Any, handler: Callable[[Any], ConfigModel]) -> ConfigModel:
        model = handler(data)
        model._source = data
        model.complete()
        return model

    def complete(self) -> None:
        """Fill in defaults that depend on other keys and check the rules across keys (raise `rule_broken`)."""

    @property
    def source(self) -> _Mapping:
        """The YAML mapping the entry was read from."""
        return self._source

    @property
    def line(self) -> int:
        """The line the entry starts on (0 for one that was not written)."""
        return _line(self._source)

    def line_of(self, key: str) -> int:
        """The line of `key` in the entry, or the entry's own line when the key is not written there."""
        return self._source.line_of(key) if isinstance(self._source, _Mapping) else self.line

    def written(self) -> dict[str, Any]:
        """The keys written in the file (even as null), with their values, in the order the model declares them."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}

    @classmethod
    def column_of(cls, key: str) -> str | None:
        """The contract column the leaf `key` is flattened into (None: it is not one)."""
        for meta in cls.model_fields[key].metadata:
            if isinstance(meta, Column):
                return meta.name
        return cls.column_prefix + key if cls.contract else None
