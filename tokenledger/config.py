"""The configuration files (three required, whatif.yaml optional), read with their line numbers and checked
against their contracts.

Each file is flattened into the tables its contract describes (`deployments`; `slo_policy`, `slo_isl_bucket`,
`cost_policy`, `cost_category_rule`, `list_price`, `rate_card`; `whatif_scenario`, `whatif_model`,
`whatif_trace`, `whatif_sampling`), typed and checked by the same contract-derived
SQL that guards the data, and loaded into the step's DuckDB as `cfg_<table>`. Any broken rule is fatal: the
error names the file, the line, the field and the rule.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import yaml

from tokenledger.contracts import Table, load_contract, typed_select, violation_reasons
from tokenledger.errors import ConfigError
from tokenledger.storage.duck import register_arrow
from tokenledger.storage.layout import HomeLayout

SLO_KEYS = {
    "isl_buckets", "itl_limit_ms", "itl_missing", "itl_p99_ms", "queue_p99_ms", "tpot_p99_ms",
    "success_rate_target", "attainment_target", "stable_window_min", "step_min", "min_requests_per_bucket",
    "peak_basis", "agent_step_output_tokens", "headroom",
}
HEADROOM_KEYS = {"n_minus_k", "scaling_lag_pct", "forecast_error_pct", "release_pct", "jitter_pct"}
COST_KEYS = {
    "price_version", "valid_from", "currency", "deployment_tag_keys", "shared_tag_value", "shared_cost_key",
    "category_rules", "token_class_weights", "list_prices", "rate_cards", "api_prices", "litellm_price_map",
    "energy_price_per_kwh",
}
API_PRICE_KEYS = {"input_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok", "cache_write_1h_per_mtok",
                  "output_per_mtok"}
# Besides the prices of the sheet's standard rate: its own price of reasoning tokens (default: output's), its
# long-context threshold and rule, the regions its standard rate prices, and its other rates (tiers, regions, long
# context), each a variation of the standard rate (docs/configuration.md, "Price sheets").
API_SHEET_KEYS = API_PRICE_KEYS | {"reasoning_per_mtok", "long_context", "regions", "rates"}
API_RATE_KEYS = API_PRICE_KEYS | {"reasoning_per_mtok", "service_tier", "inference_region", "context_tier",
                                  "multiplier"}
SERVICE_TIERS = ("standard", "flex", "priority", "batch")
CONTEXT_RULES = ("whole_request", "tokens_above")
# LiteLLM's model price map (model_prices_and_context_window.json): per-token prices by the names LiteLLM gives them.
LITELLM_PRICE_KEYS = {
    "input_per_mtok": "input_cost_per_token",
    "cache_read_per_mtok": "cache_read_input_token_cost",
    "cache_write_per_mtok": "cache_creation_input_token_cost",
    "cache_write_1h_per_mtok": "cache_creation_input_token_cost_above_1hr",
    "output_per_mtok": "output_cost_per_token",
}
# The map's suffixes of a served tier's prices (input_cost_per_token_flex, ..._priority, ..._batches) and of a
# long-context rate (input_cost_per_token_above_200k_tokens; combined: ..._above_200k_tokens_priority).
LITELLM_TIER_SUFFIXES = {"flex": "_flex", "priority": "_priority", "batch": "_batches"}
LITELLM_REASONING_KEY = "output_cost_per_reasoning_token"
_LITELLM_ABOVE = re.compile(r"_above_(\d+)k_tokens(?:_(flex|priority|batches))?$")
MAX_PRICE_MAP_BYTES = 64 * 1024 * 1024
DEFAULT_MODEL = "*"


class _Mapping(dict):
    """A YAML mapping that remembers the line it started on and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return getattr(self, "key_lines", {}).get(key, self.line)


class _LineLoader(yaml.SafeLoader):
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
    try:
        loader = _LineLoader(path.read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
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


def _line(obj: Any, fallback: int = 0) -> int:
    return getattr(obj, "line", fallback)


def _require_mapping(obj: Any, path: Path, what: str, line: int = 0) -> _Mapping:
    if not isinstance(obj, dict):
        found = "nothing" if obj is None else f"a {type(obj).__name__}"
        raise ConfigError(f"{path} line {line or _line(obj)}: {what} must be a mapping, found {found}. "
                          "Formats: docs/configuration.md.")
    return obj  # type: ignore[return-value]


def _require_list(obj: Any, path: Path, what: str, line: int) -> list[Any]:
    if not isinstance(obj, list):
        raise ConfigError(f"{path} line {line}: {what} must be a list, found {type(obj).__name__}.")
    return obj


def _check_keys(obj: dict[str, Any], known: set[str], path: Path, what: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        line = obj.line_of(unknown[0]) if isinstance(obj, _Mapping) else _line(obj)
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1, cutoff=0.75)
        if close:
            raise ConfigError(f"{path} line {line}: unknown key {unknown[0]!r} in {what}: did you mean "
                              f"{close[0]!r}? (docs/configuration.md)")
        raise ConfigError(f"{path} line {line}: unknown key {unknown[0]!r} in {what} "
                          f"(known keys: {', '.join(sorted(known))}). Check the spelling (docs/configuration.md).")


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


def flatten_deployments(path: Path) -> list[_Rows]:
    doc = _require_mapping(read_yaml(path), path, "the file", 1)
    _check_keys(doc, {"deployments"}, path, "deployments.yaml")
    contract = load_contract("deployments").table()
    out = _Rows("deployments", path, [], [])
    entries = _require_list(doc.get("deployments"), path, "deployments", _line(doc, 1))
    for entry in entries:
        entry = _require_mapping(entry, path, "a deployment")
        _check_keys(entry, set(contract.column_names), path, "a deployment")
        values = {name: entry.get(name) for name in contract.column_names}
        values["kind"] = entry.get("kind", "gpu")
        if values["kind"] == "gpu":
            values["hosting"] = entry.get("hosting", "cloud")
        out.add(_line(entry), entry, **values)
    return [out]


def flatten_slo(path: Path) -> list[_Rows]:
    doc = _require_mapping(read_yaml(path), path, "the file", 1)
    _check_keys(doc, {"versions"}, path, "slo.yaml")
    policy = _Rows("slo_policy", path, [], [])
    buckets = _Rows("slo_isl_bucket", path, [], [])
    for version in _require_list(doc.get("versions"), path, "versions", _line(doc, 1)):
        version = _require_mapping(version, path, "an SLO version")
        _check_keys(version, {"slo_version", "valid_from", "default", "models"}, path, "an SLO version")
        default = _require_mapping(version.get("default", _Mapping()), path, "default", _line(version))
        models = _require_mapping(version.get("models") or _Mapping(), path, "models", _line(version))
        for model, override in [(DEFAULT_MODEL, _Mapping()), *models.items()]:
            override = _require_mapping(override or _Mapping(), path, f"the override of {model}", _line(models))
            for block in (default, override):
                _check_keys(block, SLO_KEYS, path, "an SLO policy")
            merged = {**default, **override}
            headroom = {**(default.get("headroom") or {}), **(override.get("headroom") or {})}
            _check_keys(headroom, HEADROOM_KEYS, path, "headroom")
            line = _line(override) if model != DEFAULT_MODEL else _line(default, _line(version))
            scalars = {k: merged.get(k) for k in SLO_KEYS - {"isl_buckets", "headroom"}}
            headroom_sources = (override.get("headroom") or _Mapping(), default.get("headroom") or _Mapping())
            policy.add(line, override, default, version, *headroom_sources,
                       slo_version=version.get("slo_version"), valid_from=version.get("valid_from"),
                       model=model, **scalars, **{f"headroom_{k}": headroom.get(k) for k in HEADROOM_KEYS})
            bucket_list = merged.get("isl_buckets") or []
            for bucket in _require_list(bucket_list, path, "isl_buckets", line):
                bucket = _require_mapping(bucket, path, "an ISL bucket", line)
                _check_keys(bucket, {"isl_bucket", "min_input_tokens", "max_input_tokens", "ttft_limit_ms"},
                            path, "an ISL bucket")
                buckets.add(_line(bucket, line), bucket, slo_version=version.get("slo_version"), model=model,
                            **bucket)
    return [policy, buckets]


def flatten_costs(path: Path) -> list[_Rows]:
    doc = _require_mapping(read_yaml(path), path, "the file", 1)
    _check_keys(doc, {"versions"}, path, "costs.yaml")
    policy = _Rows("cost_policy", path, [], [])
    rules = _Rows("cost_category_rule", path, [], [])
    prices = _Rows("list_price", path, [], [])
    cards = _Rows("rate_card", path, [], [])
    sheets = _Rows("api_price", path, [], [])
    rule_keys = {"category", "service_category", "service_name", "sku_id", "resource_id", "charge_category"}
    for version in _require_list(doc.get("versions"), path, "versions", _line(doc, 1)):
        version = _require_mapping(version, path, "a cost policy version")
        _check_keys(version, COST_KEYS, path, "a cost policy version")
        pv = version.get("price_version")
        weights = _require_mapping(version.get("token_class_weights") or _Mapping(), path, "token_class_weights",
                                   _line(version))
        _check_keys(weights, {"cached", "recomputed", "output"}, path, "token_class_weights")
        policy.add(_line(version), version, weights, price_version=pv, valid_from=version.get("valid_from"),
                   currency=version.get("currency"), deployment_tag_keys=version.get("deployment_tag_keys"),
                   shared_tag_value=version.get("shared_tag_value"), shared_cost_key=version.get("shared_cost_key"),
                   weight_cached=weights.get("cached"), weight_recomputed=weights.get("recomputed"),
                   weight_output=weights.get("output"), energy_price_per_kwh=version.get("energy_price_per_kwh"))
        for order, rule in enumerate(_require_list(version.get("category_rules") or [], path, "category_rules",
                                                   _line(version)), start=1):
            rule = _require_mapping(rule, path, "a category rule", _line(version))
            _check_keys(rule, rule_keys, path, "a category rule")
            rules.add(_line(rule), rule, price_version=pv, rule_order=order, **{k: rule.get(k) for k in rule_keys})
        list_prices = _require_mapping(version.get("list_prices") or _Mapping(), path, "list_prices", _line(version))
        for model, price in list_prices.items():
            price = _require_mapping(price, path, f"the list price of {model}", _line(list_prices))
            _check_keys(price, {"output_per_mtok"}, path, "a list price")
            prices.add(_line(price), price, price_version=pv, model=model,
                       output_per_mtok=price.get("output_per_mtok"))
        rate_cards = _require_mapping(version.get("rate_cards") or _Mapping(), path, "rate_cards", _line(version))
        card_keys = {"capex_per_gpu", "lifetime_hours", "power_kw_per_gpu", "pue", "price_per_kwh",
                     "opex_per_gpu_hour"}
        for name, card in rate_cards.items():
            card = _require_mapping(card, path, f"rate card {name}", _line(rate_cards))
            _check_keys(card, card_keys, path, "a rate card")
            cards.add(_line(card), card, price_version=pv, rate_card=name, **{k: card.get(k) for k in card_keys})
        _flatten_api_prices(version, path, pv, sheets)
    return [policy, rules, prices, cards, sheets]


def _flatten_api_prices(version: _Mapping, path: Path, price_version: Any, sheets: _Rows) -> None:
    """A version's api_prices: each sheet written out per 1M tokens, or named in LiteLLM's model price map, as one
    row per rate: its standard rate (service tier standard, the regions of `regions`, input within the long-context
    threshold) and each of its other rates (a served tier, a region, long context, or a combination of them).

    A class left out of the standard rate is priced as uncached input (cache reads, cache writes: a provider without
    a cache discount or surcharge); a one-hour cache write as a cache write; reasoning as output. A class left out of
    another rate is the standard rate's times the rate's multiplier (default 1). Prices from the map are per token
    there: they are read as decimals and multiplied by 1e6 exactly; its tier and long-context keys are read as they
    are (docs/configuration.md).
    """
    entries = _require_mapping(version.get("api_prices") or _Mapping(), path, "api_prices", _line(version))
    price_map: dict[str, Any] | None = None
    map_name = version.get("litellm_price_map")
    for name, entry in entries.items():
        entry = _require_mapping(entry, path, f"the price sheet {name}", _line(entries))
        if "litellm" in entry:
            _check_keys(entry, {"litellm"}, path, f"the price sheet {name} (read from the LiteLLM price map)")
            if price_map is None:
                price_map = _read_price_map(path, map_name, _line(entry))
            key = entry.get("litellm")
            found = price_map.get(key) if isinstance(key, str) else None
            if not isinstance(found, dict):
                raise ConfigError(f"{path} line {_line(entry)}: the price sheet {name} names {key!r}, which the "
                                  f"LiteLLM price map {map_name} does not have. Use the map's key for the model "
                                  "(for example anthropic/claude-sonnet-4-5 or gpt-4.1) and re-run.")
            base, rates, long_context = _litellm_rates(found, path, name, _line(entry))
            source, regions = f"{map_name} [{key}]", None
        else:
            _check_keys(entry, API_SHEET_KEYS, path, f"the price sheet {name}")
            base = {k: entry.get(k) for k in API_PRICE_KEYS | {"reasoning_per_mtok"}}
            rates = _written_rates(entry, path, name)
            long_context = _long_context(entry, path, name)
            regions = _regions(entry, path, name)
            source = path.name
        own_reasoning = _standard_defaults(base)
        sheet = {"price_version": price_version, "price_sheet": name, "source": source,
                 "context_threshold_tokens": long_context[0], "context_rule": long_context[1],
                 "base_regions": regions}
        sheets.add(_line(entry), entry, **sheet, service_tier="standard", inference_region=None,
                   context_tier="standard", **base)
        for line, rate, multiplier, given in rates:
            prices = {k: _or(given.get(k), _times(base[k], multiplier)) for k in base}
            if not own_reasoning and "reasoning_per_mtok" not in given:
                prices["reasoning_per_mtok"] = prices["output_per_mtok"]  # reasoning at the rate's own output price
            sheets.add(line, given, **sheet, **rate, **prices)


def _standard_defaults(base: dict[str, Any]) -> bool:
    """Fill the classes a standard rate leaves out (see _flatten_api_prices); whether it gave reasoning its own
    price (else each rate prices reasoning as its own output)."""
    own_reasoning = base.get("reasoning_per_mtok") is not None
    base["cache_read_per_mtok"] = _or(base["cache_read_per_mtok"], base["input_per_mtok"])
    base["cache_write_per_mtok"] = _or(base["cache_write_per_mtok"], base["input_per_mtok"])
    base["cache_write_1h_per_mtok"] = _or(base["cache_write_1h_per_mtok"], base["cache_write_per_mtok"])
    base["reasoning_per_mtok"] = _or(base["reasoning_per_mtok"], base["output_per_mtok"])
    return own_reasoning


def _written_rates(entry: _Mapping, path: Path, name: str) -> list[tuple[int, dict, Any, dict]]:
    """A written sheet's `rates`: (line, the rate's tier, region and context tier, multiplier, its own prices)."""
    found = []
    for rate in _require_list(entry.get("rates") or [], path, f"the rates of {name}", entry.line_of("rates")):
        rate = _require_mapping(rate, path, f"a rate of the price sheet {name}", entry.line_of("rates"))
        _check_keys(rate, API_RATE_KEYS, path, f"a rate of the price sheet {name}")
        key = {"service_tier": rate.get("service_tier", "standard"), "inference_region": rate.get("inference_region"),
               "context_tier": rate.get("context_tier", "standard")}
        if key == {"service_tier": "standard", "inference_region": None, "context_tier": "standard"}:
            raise ConfigError(f"{path} line {_line(rate)}: a rate of the price sheet {name} names no service_tier, "
                              "inference_region or context_tier, so it would be the sheet's standard rate again. "
                              "Say which tier, region or context it prices (docs/configuration.md).")
        if key["context_tier"] == "long" and "long_context" not in entry:
            raise ConfigError(f"{path} line {_line(rate)}: a rate of the price sheet {name} prices context_tier "
                              "long, but the sheet has no long_context (above_input_tokens and rule). Add it.")
        found.append((_line(rate), key, rate.get("multiplier", 1),
                      {k: rate[k] for k in API_PRICE_KEYS | {"reasoning_per_mtok"} if k in rate}))
    return found


def _long_context(entry: _Mapping, path: Path, name: str) -> tuple[Any, Any]:
    """A written sheet's long_context: (the input tokens above which a request is long context, the rule)."""
    if "long_context" not in entry:
        return None, None
    long_context = _require_mapping(entry.get("long_context"), path, f"the long_context of {name}",
                                    entry.line_of("long_context"))
    _check_keys(long_context, {"above_input_tokens", "rule"}, path, f"the long_context of {name}")
    return long_context.get("above_input_tokens"), long_context.get("rule", "whole_request")


def _regions(entry: _Mapping, path: Path, name: str) -> str | None:
    """A written sheet's `regions` (the regions its standard rate prices) as comma-separated text; None: every
    region a rate of its own does not price."""
    if "regions" not in entry:
        return None
    regions = _require_list(entry.get("regions"), path, f"the regions of {name}", entry.line_of("regions"))
    if not regions or not all(isinstance(r, str) and r and "," not in r for r in regions):
        raise ConfigError(f"{path} line {entry.line_of('regions')}: the regions of the price sheet {name} must be "
                          "a non-empty list of region names (without commas).")
    return ",".join(regions)


def _litellm_rates(found: dict[str, Any], path: Path, name: str, line: int
                   ) -> tuple[dict[str, Any], list[tuple[int, dict, Any, dict]], tuple[Any, Any]]:
    """A LiteLLM map entry as a standard rate, its other rates and its long-context threshold.

    The map's keys are read as they are: `<key>_flex`, `<key>_priority`, `<key>_batches` price a served tier,
    `<key>_above_<N>k_tokens` (and `..._above_<N>k_tokens_priority`) the requests whose input exceeds N,000 tokens,
    the whole request at that rate as LiteLLM prices it. A class a rate's keys leave out is the standard one scaled
    as the rate scales input (the tier's or the threshold's discount or premium applies to every input class, as
    OpenAI and Anthropic document for batch and long context); output left out is the standard output.
    """
    base = {ours: _per_mtok(found.get(theirs)) for ours, theirs in LITELLM_PRICE_KEYS.items()}
    base["reasoning_per_mtok"] = _per_mtok(found.get(LITELLM_REASONING_KEY))
    own_reasoning = _standard_defaults(base)
    thresholds = sorted({int(m.group(1)) for k in found if (m := _LITELLM_ABOVE.search(k))})
    if len(thresholds) > 1:
        raise ConfigError(f"{path} line {line}: the price sheet {name} reads a LiteLLM entry with long-context "
                          f"prices above {' and '.join(f'{t}k' for t in thresholds)} input tokens; tokenledger "
                          "prices one threshold per sheet. Write the sheet out with the threshold your requests "
                          "reach (docs/configuration.md) and re-run.")
    suffixes = [(tier, suffix, "standard") for tier, suffix in LITELLM_TIER_SUFFIXES.items()]
    if thresholds:
        above = f"_above_{thresholds[0]}k_tokens"
        suffixes += [("standard", above, "long")]
        suffixes += [(tier, above + suffix, "long") for tier, suffix in LITELLM_TIER_SUFFIXES.items()]
    rates = []
    for tier, suffix, context_tier in suffixes:
        given = {ours: _per_mtok(found[theirs + suffix]) for ours, theirs in LITELLM_PRICE_KEYS.items()
                 if found.get(theirs + suffix) is not None}
        if "input_per_mtok" not in given and "output_per_mtok" not in given:
            continue
        scale = _ratio(given.get("input_per_mtok"), base["input_per_mtok"])
        for ours in ("cache_read_per_mtok", "cache_write_per_mtok", "cache_write_1h_per_mtok"):
            if ours not in given and base[ours] is not None:
                given[ours] = _times(base[ours], scale)
        if not own_reasoning:
            given["reasoning_per_mtok"] = given.get("output_per_mtok", base["output_per_mtok"])
        rates.append((line, {"service_tier": tier, "inference_region": None, "context_tier": context_tier}, 1, given))
    long_context = (thresholds[0] * 1000, "whole_request") if thresholds else (None, None)
    return base, rates, long_context


def _ratio(value: Any, of: Any) -> Any:
    """value / of as exact decimal text; 1 when either is missing or not a positive number."""
    from decimal import Decimal, InvalidOperation

    try:
        a, b = Decimal(str(value)), Decimal(str(of))
    except (InvalidOperation, ValueError):
        return 1
    return 1 if b <= 0 or value is None else format((a / b).normalize(), "f")


def _times(value: Any, multiplier: Any) -> Any:
    """value * multiplier as exact decimal text (a value or multiplier that is not a number is left for the
    contract to name)."""
    from decimal import Decimal, InvalidOperation

    if value is None or isinstance(value, bool) or isinstance(multiplier, bool):
        return value
    try:
        return format((Decimal(str(value)) * Decimal(str(multiplier))).normalize(), "f")
    except (InvalidOperation, ValueError):
        return value if multiplier == 1 else multiplier


WHATIF_FILE = "whatif.yaml"
SCENARIO_KEYS = {"scenario", "cache", "size_blocks", "size_gb", "scope", "routing"}
TRACE_KEYS = {"kv_block_tokens", "replicas", "kv_bytes_per_token"}
SAMPLING_KEYS = {"budget_accesses"}
# An LRU pass replays a deployment's day exactly up to this many block accesses, else a SHARDS sample of about as
# many (docs/adr/0084-lru-caches-of-large-days-are-sampled.md).
DEFAULT_BUDGET_ACCESSES = 50_000_000
# Without config/whatif.yaml the what-if replays the one scenario that needs no parameters: the upper bound.
DEFAULT_SCENARIO = {"scenario": "infinite", "cache": "infinite", "scope": "shared"}


def flatten_whatif(path: Path) -> list[_Rows]:
    """config/whatif.yaml (optional): scenarios, the KV bytes per token of models, the traces to replay, and how
    large days are sampled."""
    scenarios = _Rows("whatif_scenario", path, [], [])
    models = _Rows("whatif_model", path, [], [])
    traces = _Rows("whatif_trace", path, [], [])
    sampling = _Rows("whatif_sampling", path, [], [])
    doc = _require_mapping(read_yaml(path), path, "the file", 1) if path.is_file() else _Mapping()
    _check_keys(doc, {"scenarios", "models", "traces", "sampling"}, path, "whatif.yaml")
    entries = doc.get("scenarios")
    if entries is None:
        scenarios.add(0, **DEFAULT_SCENARIO)
    for entry in _require_list(entries or [], path, "scenarios", doc.line_of("scenarios")):
        entry = _require_mapping(entry, path, "a scenario", doc.line_of("scenarios"))
        _check_keys(entry, SCENARIO_KEYS, path, "a scenario")
        scenarios.add(_line(entry), entry, **{k: entry.get(k) for k in SCENARIO_KEYS - {"scope"}},
                      scope=entry.get("scope", "shared"))
    model_map = _require_mapping(doc.get("models") or _Mapping(), path, "models", doc.line_of("models"))
    for model, entry in model_map.items():
        entry = _require_mapping(entry, path, f"the entry of model {model}", model_map.line_of(model))
        _check_keys(entry, {"kv_bytes_per_token"}, path, f"the entry of model {model}")
        models.add(_line(entry), entry, model=model, kv_bytes_per_token=entry.get("kv_bytes_per_token"))
    trace_map = _require_mapping(doc.get("traces") or _Mapping(), path, "traces", doc.line_of("traces"))
    for trace, entry in trace_map.items():
        entry = _require_mapping(entry, path, f"the entry of trace {trace}", trace_map.line_of(trace))
        _check_keys(entry, TRACE_KEYS, path, f"the entry of trace {trace}")
        traces.add(_line(entry), entry, trace=trace, **{k: entry.get(k) for k in TRACE_KEYS - {"replicas"}},
                   replicas=entry.get("replicas", 1))
    entry = _require_mapping(doc.get("sampling") or _Mapping(), path, "sampling", doc.line_of("sampling"))
    _check_keys(entry, SAMPLING_KEYS, path, "sampling")
    sampling.add(doc.line_of("sampling"), entry, budget_accesses=entry.get("budget_accesses", DEFAULT_BUDGET_ACCESSES))
    return [scenarios, models, traces, sampling]


def _or(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _per_mtok(per_token: Any) -> Any:
    """A per-token price of the map as the decimal text of its price per 1M tokens (exact: 3e-06 -> 3)."""
    if isinstance(per_token, bool) or not isinstance(per_token, int | float):
        return per_token  # missing, or not a number: the contract says what is wrong
    from decimal import Decimal

    return format((Decimal(repr(per_token)) * 1_000_000).normalize(), "f")


def _read_price_map(path: Path, map_name: Any, line: int) -> dict[str, Any]:
    """LiteLLM's model price map named by a version's litellm_price_map, relative to the config folder."""
    if not isinstance(map_name, str) or not map_name:
        raise ConfigError(f"{path} line {line}: a price sheet reads the LiteLLM price map, but the version has no "
                          "litellm_price_map (the map's file name in the config folder). Add it and re-run.")
    map_path = path.parent / map_name
    if map_path.parent.resolve() != path.parent.resolve() or not map_path.is_file():
        raise ConfigError(f"{path}: litellm_price_map {map_name!r} is not a file in {path.parent}. Copy LiteLLM's "
                          "model_prices_and_context_window.json there and name it, then re-run.")
    if map_path.stat().st_size > MAX_PRICE_MAP_BYTES:
        raise ConfigError(f"{map_path} is larger than {MAX_PRICE_MAP_BYTES // 2**20} MB, which no price map is; "
                          "refused unread.")
    try:
        doc = json.loads(map_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{map_path} is not a JSON price map ({exc}). Download it again and re-run.") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{map_path} is not a JSON object of models and their prices. Download it again.")
    return doc


def _load_rows(con: duckdb.DuckDBPyConnection, rows: _Rows, table: Table) -> None:
    """Type `rows` by the contract into `cfg_<table>`; raise naming file, line and rule on any violation."""
    columns = {f"{c}__text": pa.array([r.get(c) for r in rows.rows], pa.string()) for c in table.column_names}
    columns["_line"] = pa.array(rows.lines, pa.int64())
    columns["_row"] = pa.array(range(len(rows.rows)), pa.int64())
    register_arrow(con, "_config_text", pa.table(columns))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _config_typed AS "
                    f"SELECT _line, _row, * EXCLUDE (_line, _row), {', '.join(typed_select(table))} "
                    "FROM _config_text")
        problems = con.execute(f"SELECT _row, {violation_reasons(table)} AS reason FROM _config_typed "
                               "WHERE reason IS NOT NULL ORDER BY _line").fetchall()
    finally:
        con.unregister("_config_text")
    if problems:
        details = "\n".join(
            f"  {rows.path} line {rows.field_line(row, part.split(':')[0])}: {part}"
            for row, reason in problems[:20] for part in reason.split("; "))
        raise ConfigError(f"{rows.path} breaks the {table.name} contract "
                          f"(data_contracts/*.odcs.yaml):\n{details}\nFix these entries and re-run.")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table.name} AS "
                f"SELECT _line, {', '.join(table.column_names)} FROM _config_typed")
    for rule in table.set_rules:
        broken = con.execute(rule.query).fetchone()[0]
        if broken:
            raise ConfigError(f"{rows.path}: {rule.name}: {rule.description} ({broken} case(s)). "
                              "Fix the file and re-run.")
    con.execute(f"CREATE OR REPLACE TEMP TABLE cfg_{table.name} AS SELECT * FROM {table.name}")
    con.execute(f"DROP TABLE {table.name}")
    con.execute("DROP TABLE _config_typed")


CONFIG_FILES = ("deployments.yaml", "slo.yaml", "costs.yaml")
OPTIONAL_CONFIG_FILES = (WHATIF_FILE,)
# Checked config tables by the digest of the files' bytes: every step of a run loads the same files, and checking
# them against their contracts costs more than the step's own work on a small day. The last CHECKED_KEPT versions
# are kept (a few kB each), so a process that goes back to an earlier version, as the tests' homes do, does not
# check it again: a digest names the same bytes, so its tables stay right.
CHECKED_KEPT = 8
_checked: OrderedDict[str, dict[str, pa.Table]] = OrderedDict()


def load_config(con: duckdb.DuckDBPyConnection, layout: HomeLayout) -> None:
    """Read, check and load the three config files and the optional whatif.yaml into `cfg_*` temp tables (or views
    of the same rows) of `con`.

    The checked tables are kept per process under the digest of the files' contents, so a file changed between
    two steps is read and checked again, and an unchanged one is not checked twice."""
    layout.check()
    # Every regular file of the config folder: the three files and a price map costs.yaml may name.
    digest = hashlib.sha256(b"".join(
        name.encode() + hashlib.sha256((layout.config / name).read_bytes()).digest()
        for name in sorted({*CONFIG_FILES, *(p.name for p in layout.config.iterdir() if p.is_file() and (
            p.suffix == ".json" or p.name in OPTIONAL_CONFIG_FILES))}))).hexdigest()
    tables = _checked.get(digest)
    if tables is None:
        _drop_shared_tables(con)  # an earlier digest's, which a table this one lacks would otherwise read
        config_tables = load_contract("config")
        deployments = load_contract("deployments").table()
        for rows in flatten_deployments(layout.config / "deployments.yaml"):
            _load_rows(con, rows, deployments)
        for rows in flatten_slo(layout.config / "slo.yaml") + flatten_costs(layout.config / "costs.yaml"):
            _load_rows(con, rows, config_tables.table(rows.table))
        whatif = load_contract("whatif")
        for rows in flatten_whatif(layout.config / WHATIF_FILE):
            _load_rows(con, rows, whatif.table(rows.table))
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary "
                                           "AND table_name LIKE 'cfg\\_%' ESCAPE '\\'").fetchall()]
        _checked[digest] = {name: con.sql(f"SELECT * FROM {name}").to_arrow_table() for name in names}
        while len(_checked) > CHECKED_KEPT:
            _checked.popitem(last=False)
        return
    _checked.move_to_end(digest)
    # A connection that loaded the config before holds them as temp tables, which would hide the shared ones.
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE "
                               "'cfg\\_%' ESCAPE '\\'").fetchall():
        if name in tables:
            con.execute(f"DROP TABLE {name}")
    if _shared_tables_hold(con, digest):
        return
    if _in_memory(con):
        _share_tables(con, digest, tables)
        return
    # A database on disk gets nothing written into it: the connection's own views of the checked tables.
    for name, checked in tables.items():
        register_arrow(con, name, checked)


# In an in-memory database (the process's compute database: tokenledger.storage.duck) the checked tables are made once
# as tables of its main schema, which every connection to it reads, with this marker naming the files' digest: each
# step's own views of 11 tables cost 40 ms of a small day's step, a quarter second of a run.
_SHARED_DIGEST = "config__digest"


def _in_memory(con: duckdb.DuckDBPyConnection) -> bool:
    return con.execute("SELECT path IS NULL FROM duckdb_databases() WHERE database_name = current_database()"
                       ).fetchone()[0]


def _shared_tables_hold(con: duckdb.DuckDBPyConnection, digest: str) -> bool:
    exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                         "AND database_name = current_database() AND table_name = $t", {"t": _SHARED_DIGEST}
                         ).fetchone()[0]
    return bool(exists) and con.execute(f"SELECT any_value(digest) = $d FROM main.{_SHARED_DIGEST}",
                                        {"d": digest}).fetchone()[0] is True


def _drop_shared_tables(con: duckdb.DuckDBPyConnection) -> None:
    if not _in_memory(con):
        return
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                               "AND database_name = current_database() AND (table_name LIKE 'cfg\\_%' ESCAPE '\\' "
                               "OR table_name = $t)", {"t": _SHARED_DIGEST}).fetchall():
        con.execute(f"DROP TABLE main.{name}")


def _share_tables(con: duckdb.DuckDBPyConnection, digest: str, tables: dict[str, pa.Table]) -> None:
    _drop_shared_tables(con)
    for name, checked in tables.items():
        register_arrow(con, "_config_checked", checked)
        try:
            con.execute(f"CREATE TABLE main.{name} AS SELECT * FROM _config_checked")
        finally:
            con.unregister("_config_checked")
    con.execute(f"CREATE TABLE main.{_SHARED_DIGEST} AS SELECT $d AS digest", {"d": digest})
