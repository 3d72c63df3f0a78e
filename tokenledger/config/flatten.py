"""Each configuration file, read into its model (tokenledger.config.models), flattened into the rows of the tables
its contract describes: `deployments`; `slo_policy`, `slo_isl_bucket`; `cost_policy`, `cost_category_rule`,
`list_price`, `rate_card`, `api_price`; `whatif_scenario`, `whatif_model`, `whatif_trace`, `whatif_sampling`.

Values stay as written, in the text form the contract's SQL types them from (`_text`), each row with the file and
line it came from and the YAML mappings its fields were read from, so a broken rule names the line of its field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenledger.config.messages import read_file
from tokenledger.config.models import (
    DEFAULT_MODEL,
    CategoryRule,
    CostsFile,
    DeploymentsFile,
    Headroom,
    RateCard,
    Scenario,
    SloFile,
    SloPolicy,
    TokenClassWeights,
    Trace,
    WhatifFile,
)
from tokenledger.config.prices import flatten_api_prices
from tokenledger.config.source import _Mapping, _Rows, read_yaml
from tokenledger.contracts import load_contract

WHATIF_FILE = "whatif.yaml"
# Without config/whatif.yaml the what-if replays the one scenario that needs no parameters: the upper bound.
DEFAULT_SCENARIO = {"scenario": "infinite", "cache": "infinite", "scope": "shared"}


def _read(model: Any, path: Path, optional: bool = False) -> Any:
    doc = read_yaml(path) if not optional or path.is_file() else _Mapping()
    return read_file(model, doc, path)


def flatten_deployments(path: Path) -> list[_Rows]:
    out = _Rows("deployments", path, [], [])
    columns = load_contract("deployments").table().column_names
    for entry in _read(DeploymentsFile, path).deployments:
        out.add(entry.line, entry.source, **{name: getattr(entry, name) for name in columns})
    return [out]


def flatten_slo(path: Path) -> list[_Rows]:
    """One slo_policy row per version and model (the default as model '*', each override merged over it key by
    key, headroom too) and its ISL buckets (an override's replace the default's)."""
    policy = _Rows("slo_policy", path, [], [])
    buckets = _Rows("slo_isl_bucket", path, [], [])
    for version in _read(SloFile, path).versions:
        default = version.default
        for model, override in [(DEFAULT_MODEL, None), *(version.models or {}).items()]:
            merged = {**default.written(), **(override.written() if override else {})}
            own = override.headroom if override else None
            headroom = {**(default.headroom.written() if default.headroom else {}),
                        **(own.written() if own else {})}
            line = override.line if override else default.line
            scalars = {k: merged.get(k) for k in SloPolicy.model_fields if k not in ("isl_buckets", "headroom")}
            headroom_sources = (own.source if own else _Mapping(),
                                default.headroom.source if default.headroom else _Mapping())
            policy.add(line, override.source if override else _Mapping(), default.source, version.source,
                       *headroom_sources, slo_version=version.slo_version, valid_from=version.valid_from,
                       model=model, **scalars, **{f"headroom_{k}": headroom.get(k) for k in Headroom.model_fields})
            for bucket in merged.get("isl_buckets") or []:
                buckets.add(bucket.line, bucket.source, slo_version=version.slo_version, model=model,
                            **bucket.written())
    return [policy, buckets]


def flatten_costs(path: Path) -> list[_Rows]:
    policy = _Rows("cost_policy", path, [], [])
    rules = _Rows("cost_category_rule", path, [], [])
    prices = _Rows("list_price", path, [], [])
    cards = _Rows("rate_card", path, [], [])
    sheets = _Rows("api_price", path, [], [])
    for version in _read(CostsFile, path).versions:
        pv = version.price_version
        weights = version.token_class_weights
        policy.add(version.line, version.source, weights.source if weights else _Mapping(), price_version=pv,
                   valid_from=version.valid_from, currency=version.currency,
                   deployment_tag_keys=version.deployment_tag_keys, shared_tag_value=version.shared_tag_value,
                   shared_cost_key=version.shared_cost_key,
                   **{f"weight_{k}": getattr(weights, k) if weights else None for k in TokenClassWeights.model_fields},
                   energy_price_per_kwh=version.energy_price_per_kwh)
        for order, rule in enumerate(version.category_rules or [], start=1):
            rules.add(rule.line, rule.source, price_version=pv, rule_order=order,
                      **{k: getattr(rule, k) for k in CategoryRule.model_fields})
        for model, price in (version.list_prices or {}).items():
            prices.add(price.line, price.source, price_version=pv, model=model, output_per_mtok=price.output_per_mtok)
        for name, card in (version.rate_cards or {}).items():
            cards.add(card.line, card.source, price_version=pv, rate_card=name,
                      **{k: getattr(card, k) for k in RateCard.model_fields})
        flatten_api_prices(version, path, sheets)
    return [policy, rules, prices, cards, sheets]


def flatten_whatif(path: Path) -> list[_Rows]:
    """config/whatif.yaml (optional): scenarios, the KV bytes per token of models, the traces to replay, and how
    large days are sampled."""
    scenarios = _Rows("whatif_scenario", path, [], [])
    models = _Rows("whatif_model", path, [], [])
    traces = _Rows("whatif_trace", path, [], [])
    sampling = _Rows("whatif_sampling", path, [], [])
    whatif = _read(WhatifFile, path, optional=True)
    if whatif.scenarios is None:
        scenarios.add(0, **DEFAULT_SCENARIO)
    for entry in whatif.scenarios or []:
        scenarios.add(entry.line, entry.source, **{k: getattr(entry, k) for k in Scenario.model_fields})
    for model, entry in (whatif.models or {}).items():
        models.add(entry.line, entry.source, model=model, kv_bytes_per_token=entry.kv_bytes_per_token)
    for trace, entry in (whatif.traces or {}).items():
        traces.add(entry.line, entry.source, trace=trace, **{k: getattr(entry, k) for k in Trace.model_fields})
    sampling.add(whatif.line_of("sampling"), whatif.sampling.source, budget_accesses=whatif.sampling.budget_accesses)
    return [scenarios, models, traces, sampling]
