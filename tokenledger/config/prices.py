"""Price sheets of hosted-API models (a cost policy version's `api_prices`), as rows of `api_price`: one per rate.

A sheet is written out per 1M tokens (tokenledger.config.models.PriceSheet) or named in LiteLLM's model price map
(LitellmPriceSheet), whose per-token prices, tier keys and long-context keys are read as they are
(docs/configuration.md, "Price sheets of hosted-API models").
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenledger.config.models import CostVersion, LitellmPriceSheet
from tokenledger.errors import ConfigError

if TYPE_CHECKING:
    from tokenledger.config.source import _Rows

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


def flatten_api_prices(version: CostVersion, path: Path, sheets: _Rows) -> None:
    """A version's api_prices: each sheet written out per 1M tokens, or named in LiteLLM's model price map, as one
    row per rate: its standard rate (service tier standard, the regions of `regions`, input within the long-context
    threshold) and each of its other rates (a served tier, a region, long context, or a combination of them).

    A class left out of the standard rate is priced as uncached input (cache reads, cache writes: a provider without
    a cache discount or surcharge); a one-hour cache write as a cache write; reasoning as output. A class left out of
    another rate is the standard rate's times the rate's multiplier (default 1). Prices from the map are per token
    there: they are read as decimals and multiplied by 1e6 exactly; its tier and long-context keys are read as they
    are (docs/configuration.md).
    """
    price_map: dict[str, Any] | None = None
    map_name = version.litellm_price_map
    for name, entry in (version.api_prices or {}).items():
        if isinstance(entry, LitellmPriceSheet):
            if price_map is None:
                price_map = _read_price_map(path, map_name, entry.line)
            key = entry.litellm
            found = price_map.get(key) if isinstance(key, str) else None
            if not isinstance(found, dict):
                raise ConfigError(f"{path} line {entry.line}: the price sheet {name} names {key!r}, which the "
                                  f"LiteLLM price map {map_name} does not have. Use the map's key for the model "
                                  "(for example anthropic/claude-sonnet-4-5 or gpt-4.1) and re-run.")
            base, rates, long_context = _litellm_rates(found, path, name, entry.line)
            source, regions = f"{map_name} [{key}]", None
        else:
            base = entry.standard()
            rates = [(rate.line, {"service_tier": rate.service_tier, "inference_region": rate.inference_region,
                                  "context_tier": rate.context_tier}, rate.multiplier, rate.prices())
                     for rate in entry.rates or []]
            long_context = (None, None) if entry.long_context is None else (
                entry.long_context.above_input_tokens, entry.long_context.rule)
            regions = None if entry.regions is None else ",".join(entry.regions)
            source = path.name
        own_reasoning = _standard_defaults(base)
        sheet = {"price_version": version.price_version, "price_sheet": name, "source": source,
                 "context_threshold_tokens": long_context[0], "context_rule": long_context[1],
                 "base_regions": regions}
        sheets.add(entry.line, entry.source, **sheet, service_tier="standard", inference_region=None,
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
    try:
        a, b = Decimal(str(value)), Decimal(str(of))
    except (InvalidOperation, ValueError):
        return 1
    return 1 if b <= 0 or value is None else format((a / b).normalize(), "f")


def _times(value: Any, multiplier: Any) -> Any:
    """value * multiplier as exact decimal text (a value or multiplier that is not a number is left for the
    contract to name)."""
    if value is None or isinstance(value, bool) or isinstance(multiplier, bool):
        return value
    try:
        return format((Decimal(str(value)) * Decimal(str(multiplier))).normalize(), "f")
    except (InvalidOperation, ValueError):
        return value if multiplier == 1 else multiplier


def _or(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _per_mtok(per_token: Any) -> Any:
    """A per-token price of the map as the decimal text of its price per 1M tokens (exact: 3e-06 -> 3)."""
    if isinstance(per_token, bool) or not isinstance(per_token, int | float):
        return per_token  # missing, or not a number: the contract says what is wrong
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
