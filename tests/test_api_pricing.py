"""Hosted-API requests priced as providers bill them (sql/cost/api_request_costs.sql): the service tier that served a
request, its region, its input size against the sheet's long-context threshold (under either threshold rule),
reasoning tokens, and a request nothing prices (unpriced, counted, NULL cost: never $0).

The formula is run straight through its SQL file over the conftest config plus the sheets below (read by
tokenledger/config/, LiteLLM map and all); one end-to-end day shows the unpriced request counted in
finance.cost_reconciliation_daily and the day held back by the blocking check api_requests_priced.
Every expected figure is worked out in the comments, per 1M tokens then divided by 1e6.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import (
    COSTS_YAML,
    DEPLOYMENTS_YAML,
    failure_text,
    gateway_dir,
    materialize,
    request,
    rows,
    write_jsonl,
)

DAY = "2026-11-16"

DEPLOYMENTS = """\
  - {deployment_id: gpt5-api, model: gpt5, kind: api, provider: openai, price_sheet: gpt-5, valid_from: 2026-11-01}
  - {deployment_id: wr-api, model: opus, kind: api, provider: anthropic, price_sheet: whole, valid_from: 2026-11-01}
  - {deployment_id: ta-api, model: opus-ta, kind: api, provider: anthropic, price_sheet: above,
     valid_from: 2026-11-01}
  - {deployment_id: wr-batch, model: opus-batch, kind: api, provider: anthropic, price_sheet: whole,
     service_tier: batch, valid_from: 2026-11-01}
  - {deployment_id: wr-us, model: opus-us, kind: api, provider: bedrock, price_sheet: whole, inference_region: us,
     valid_from: 2026-11-01}
  - {deployment_id: flash-api, model: flash, kind: api, provider: google, valid_from: 2026-11-01}
  - {deployment_id: mystery-api, model: mystery, kind: api, provider: acme, valid_from: 2026-11-01}
"""

# `whole` and `above` are one price list (input 5, cache read 0.50, five-minute write 6.25, one-hour write 10,
# output 25 per 1M) under the two threshold rules; long context doubles input classes and takes output to 37.5;
# batch halves everything; region us is 1.1x the global price.
_OPUS = """\
        input_per_mtok: 5
        cache_read_per_mtok: 0.50
        cache_write_per_mtok: 6.25
        cache_write_1h_per_mtok: 10
        output_per_mtok: 25
        regions: [global]
        rates:
          - {context_tier: long, multiplier: 2, output_per_mtok: 37.5}
          - {service_tier: batch, multiplier: 0.5}
          - {inference_region: us, multiplier: 1.1}
"""
SHEETS = f"""\
    litellm_price_map: prices.json
    api_prices:
      gpt-5: {{litellm: gpt-5}}
      whole:
        long_context: {{above_input_tokens: 200000, rule: whole_request}}
{_OPUS}\
      above:
        long_context: {{above_input_tokens: 200000, rule: tokens_above}}
{_OPUS}\
      flash: {{input_per_mtok: 0.15, output_per_mtok: 0.60, reasoning_per_mtok: 3.50}}
"""

# GPT-5's entry as LiteLLM's model_prices_and_context_window.json writes it: standard, flex and priority prices.
PRICE_MAP = {"gpt-5": {
    "input_cost_per_token": 1.25e-06, "cache_read_input_token_cost": 1.25e-07, "output_cost_per_token": 1e-05,
    "input_cost_per_token_flex": 6.25e-07, "cache_read_input_token_cost_flex": 6.25e-08,
    "output_cost_per_token_flex": 5e-06,
    "input_cost_per_token_priority": 2.5e-06, "cache_read_input_token_cost_priority": 2.5e-07,
    "output_cost_per_token_priority": 2e-05, "litellm_provider": "openai", "mode": "chat"}}


def _home(root: Path) -> Path:
    from tests.conftest import make_home

    home = make_home(root)
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML + DEPLOYMENTS)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML + SHEETS)
    (home / "config" / "prices.json").write_text(json.dumps(PRICE_MAP))
    return home


_COLUMNS = {"request_id": "VARCHAR", "received_at": "TIMESTAMPTZ", "model": "VARCHAR", "deployment_id": "VARCHAR",
            "tenant_id": "VARCHAR", "status": "VARCHAR", "input_tokens": "BIGINT", "cached_input_tokens": "BIGINT",
            "cache_write_tokens": "BIGINT", "cache_write_1h_tokens": "BIGINT", "output_tokens": "BIGINT",
            "reasoning_tokens": "BIGINT", "service_tier": "VARCHAR", "inference_region": "VARCHAR",
            "source_cost": "DECIMAL(38,12)"}


def _req(rid: str, deployment: str, input_tokens: int, output: int, cached: int = 0, **kw: Any) -> dict[str, Any]:
    return {"request_id": rid, "received_at": f"{DAY}T10:00:00Z", "model": None, "deployment_id": deployment,
            "tenant_id": "t", "status": "ok", "input_tokens": input_tokens, "cached_input_tokens": cached,
            "cache_write_tokens": None, "cache_write_1h_tokens": None, "output_tokens": output,
            "reasoning_tokens": None, "service_tier": None, "inference_region": None, "source_cost": None, **kw}


def _price(home: Path, requests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run sql/cost/api_request_costs.sql over `requests` as the day's core.gateway_requests; its rows by request id."""
    from tokenledger.config import load_config
    from tokenledger.cost.day import cost_policy_in_force
    from tokenledger.storage.duck import statement, used_params
    from tokenledger.storage.lake import DayWindow
    from tokenledger.storage.layout import HomeLayout

    layout, window = HomeLayout.of(home), DayWindow(date.fromisoformat(DAY))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    load_config(con, layout)
    text = "CREATE TEMP TABLE day_deployments AS " + statement("deployments_daily")
    con.execute(text, used_params(text, window.params()))
    cost_policy_in_force(con, layout, window)
    con.execute("CREATE TABLE day_requests (" + ", ".join(f"{c} {t}" for c, t in _COLUMNS.items()) + ")")
    con.executemany(f"INSERT INTO day_requests VALUES ({', '.join('?' for _ in _COLUMNS)})",
                    [[r[c] for c in _COLUMNS] for r in requests])
    text = statement("api_request_costs")
    cursor = con.execute(text, used_params(text, window.params()))
    names = [d[0] for d in cursor.description]
    return {r[1]: dict(zip(names, r, strict=True)) for r in cursor.fetchall()}


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    home = _home(tmp_path_factory.mktemp("pricing") / "home")
    return _price(home, [
        # the same GPT-5 request served at two tiers, the tier as the response reported it
        _req("prio", "gpt5-api", 10_000, 2_000, cached=4_000, reasoning_tokens=1_500, service_tier="priority"),
        _req("flex", "gpt5-api", 10_000, 2_000, cached=4_000, reasoning_tokens=1_500, service_tier="flex"),
        _req("std", "gpt5-api", 10_000, 2_000, cached=4_000, reasoning_tokens=1_500),
        # 250k input tokens, 50,000 of them cache reads, 1,000 output: under each threshold rule
        _req("long-whole", "wr-api", 250_000, 1_000, cached=50_000),
        _req("long-above", "ta-api", 250_000, 1_000, cached=50_000),
        # a batch request (its deployment's tier: the log says none) with cache reads and a cache write
        _req("batch", "wr-batch", 20_000, 500, cached=15_000, cache_write_tokens=1_000),
        # a regional request (its deployment's region) and one in a region no rate prices
        _req("us", "wr-us", 10_000, 1_000),
        _req("eu", "wr-api", 10_000, 1_000, inference_region="eu"),
        # a tier the sheet has no price for, and batch with long context (no rate prices the pair)
        _req("flex-opus", "wr-api", 10_000, 1_000, service_tier="flex"),
        _req("batch-long", "wr-api", 250_000, 1_000, service_tier="batch"),
        # reasoning models: a sheet with its own reasoning price, and GPT-5 whose reasoning is priced as output
        _req("think", "flash-api", 1_000, 3_000, reasoning_tokens=2_000),
        _req("gpt-think", "gpt5-api", 1_000, 3_000, reasoning_tokens=2_000),
        # a model no sheet prices
        _req("unknown", "mystery-api", 1_000, 100),
        # a rejected request reached no model: not billed, not priced
        _req("429", "gpt5-api", 500, 0, status="rejected"),
    ])


def test_served_tier_chooses_the_rate(priced: dict[str, dict[str, Any]]) -> None:
    # priority: 6,000 uncached * 2.5 + 4,000 cache reads * 0.25 + 2,000 output * 20 = 15,000 + 1,000 + 40,000
    assert priced["prio"]["service_tier"] == "priority"
    assert priced["prio"]["cost"] == Decimal("0.056")
    # flex: 6,000 * 0.625 + 4,000 * 0.0625 + 2,000 * 5 = 3,750 + 250 + 10,000 = 14,000
    assert priced["flex"]["cost"] == Decimal("0.014")
    # no tier in the log, none on the deployment: standard, 6,000 * 1.25 + 4,000 * 0.125 + 2,000 * 10 = 28,000
    assert (priced["std"]["service_tier"], priced["std"]["cost"]) == ("standard", Decimal("0.028"))


def test_long_context_under_each_threshold_rule(priced: dict[str, dict[str, Any]]) -> None:
    whole, above = priced["long-whole"], priced["long-above"]
    assert whole["context_tier"] == above["context_tier"] == "long"
    # whole_request: every token at the long rate: 200,000 uncached * 10 + 50,000 reads * 1.0 + 1,000 output * 37.5
    # = 2,000,000 + 50,000 + 37,500 = 2,087,500 per 1M
    assert whole["tokens_above_threshold"] == 250_000
    assert whole["cost"] == Decimal("2.0875")
    # tokens_above: the 50,000 input tokens above 200,000, from the end of the prompt (all uncached), at 10; the
    # other 150,000 uncached at 5, the 50,000 reads at 0.50, output at the standard 25:
    # 500,000 + 750,000 + 25,000 + 25,000 = 1,300,000 per 1M
    assert above["tokens_above_threshold"] == 50_000
    assert (above["cost_input_uncached"], above["cost_cache_read"], above["cost_output"]) \
        == (Decimal("1.25"), Decimal("0.025"), Decimal("0.025"))
    assert above["cost"] == Decimal("1.3")


def test_batch_with_cache_reads_and_a_regional_request(priced: dict[str, dict[str, Any]]) -> None:
    batch = priced["batch"]
    # the deployment's tier (batch) at half of every class: 4,000 uncached * 2.5 + 15,000 reads * 0.25 + 1,000
    # five-minute writes * 3.125 + 500 output * 12.5 = 10,000 + 3,750 + 3,125 + 6,250 = 23,125 per 1M
    assert batch["service_tier"] == "batch"
    assert (batch["tokens_input_uncached"], batch["tokens_cache_read"], batch["tokens_cache_write_5m"]) \
        == (4_000, 15_000, 1_000)
    assert batch["cost"] == Decimal("0.023125")
    # region us (the deployment's) at 1.1x: 10,000 * 5.5 + 1,000 * 27.5 = 55,000 + 27,500 = 82,500 per 1M
    assert (priced["us"]["inference_region"], priced["us"]["cost"]) == ("us", Decimal("0.0825"))


def test_reasoning_at_its_own_price_or_as_output_never_twice(priced: dict[str, dict[str, Any]]) -> None:
    think = priced["think"]
    # 1,000 input * 0.15 + 1,000 non-reasoning output * 0.60 + 2,000 reasoning * 3.50 = 150 + 600 + 7,000
    assert (think["tokens_output"], think["tokens_reasoning"]) == (3_000, 2_000)
    assert think["cost_reasoning"] == Decimal("0.007")
    assert think["cost_output"] == Decimal("0.0076")
    assert think["cost"] == Decimal("0.00775")
    # GPT-5's reasoning is output at 10: 1,000 * 1.25 + 3,000 * 10 = 31,250 (not 5,000 output tokens: 51,250)
    assert priced["gpt-think"]["cost"] == Decimal("0.03125")


def test_a_request_nothing_prices_is_unpriced_with_its_reason_never_zero(priced: dict[str, dict[str, Any]]) -> None:
    expected = {
        "unknown": "no price sheet mystery in cost policy p1",
        "eu": "no price for service tier standard in region eu in price sheet whole",
        "flex-opus": "no price for service tier flex in price sheet whole",
        "batch-long": "no long-context price (input 250000 > 200000 tokens) for service tier batch in price sheet "
                      "whole",
    }
    for rid, reason in expected.items():
        row = priced[rid]
        assert (row["price_status"], row["unpriced_reason"], row["cost"], row["cost_output"]) \
            == ("unpriced", reason, None, None), rid
    assert sum(r["price_status"] == "priced" for r in priced.values()) == 9
    assert "429" not in priced


def test_litellm_tier_keys_are_read_as_they_are(tmp_path: Path) -> None:
    import duckdb as db

    from tokenledger.config import load_config
    from tokenledger.storage.layout import HomeLayout

    home = _home(tmp_path / "home")
    con = db.connect()
    load_config(con, HomeLayout.of(home))
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT service_tier, input_per_mtok::DOUBLE, cache_read_per_mtok::DOUBLE, output_per_mtok::DOUBLE, "
        "reasoning_per_mtok::DOUBLE FROM cfg_api_price WHERE price_sheet = 'gpt-5'").fetchall()}
    # per token times 1e6; reasoning as each rate's own output
    assert got == {"standard": (1.25, 0.125, 10, 10), "flex": (0.625, 0.0625, 5, 5), "priority": (2.5, 0.25, 20, 20)}


_OPENAI_USAGE = {"prompt_tokens": 10_000, "completion_tokens": 2_000, "prompt_tokens_details": {"cached_tokens": 4_000},
                 "completion_tokens_details": {"reasoning_tokens": 1_500}}


def _unpriced_day(home: Path) -> None:
    write_jsonl(gateway_dir(home, DAY) / "api.jsonl", [
        request("g1", model="gpt5", deployment_id="gpt5-api", input_tokens=10_000, cached_input_tokens=4_000,
                output_tokens=2_000, reasoning_tokens=1_500),
        request("x1", model="mystery", deployment_id="mystery-api", input_tokens=1_000, cached_input_tokens=0,
                output_tokens=100),
        request("m1"),
    ])
    # The same GPT-5 call answered at two tiers, as the responses report them (the request may have asked auto):
    # a Chat Completion served at priority, a Response served at flex.
    write_jsonl(home / "raw" / "openai" / f"dt={DAY}" / "responses.jsonl", [
        {"id": "chatcmpl-P", "object": "chat.completion", "created": 1794823200, "model": "gpt5",
         "service_tier": "priority", "choices": [], "usage": _OPENAI_USAGE},
        {"id": "resp_F", "object": "response", "created_at": 1794823300, "status": "completed", "model": "gpt5",
         "service_tier": "flex", "output": [],
         "usage": {"input_tokens": 10_000, "output_tokens": 2_000, "input_tokens_details": {"cached_tokens": 4_000},
                   "output_tokens_details": {"reasoning_tokens": 1_500}}},
    ])
    # An Anthropic Message whose usage says the Batches API served it, on a deployment whose default is standard.
    write_jsonl(home / "raw" / "anthropic" / f"dt={DAY}" / "messages.jsonl", [
        {"id": "msg_B", "type": "message", "role": "assistant", "model": "opus", "content": [],
         "stop_reason": "end_turn", "timestamp": f"{DAY}T10:05:00Z",
         "usage": {"input_tokens": 2_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
                   "output_tokens": 100, "service_tier": "batch"}},
    ])


def test_tiers_served_as_the_sources_report_them_and_an_unpriced_request_holds_the_day_back(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path / "home")
    monkeypatch.setenv("TOKENLEDGER_HOME", str(home))
    _unpriced_day(home)
    upto = ["finance/cost_reconciliation_daily", "finance/cost_per_mtok_daily"]
    result = materialize(DAY, upto=upto, run_config=None)
    assert not result.success, "an unpriced request over the default share of 0 must hold the day back"
    failed = {e.event_specific_data.asset_check_key.name: e.event_specific_data.description
              for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION" and not e.event_specific_data.passed}
    assert "api_requests_priced" in failed, failure_text(result)
    assert "1 of 5 hosted-API requests (20.00%) unpriced (no price sheet mystery in cost policy p1: 1)" \
        in failed["api_requests_priced"]
    # the tier each source reported as served, and its price (as in test_served_tier_chooses_the_rate): g1 (the
    # gateway log says none) standard 28,000; chatcmpl-P priority 56,000; resp_F flex 14,000 per 1M; msg_B batch,
    # 2,000 input * 2.5 + 100 output * 12.5 = 6,250 per 1M
    got = {r["request_id"]: (r["service_tier"], r["cost"]) for r in rows(home, "core", "api_request_costs", DAY)}
    assert got == {"g1": ("standard", Decimal("0.028")), "chatcmpl-P": ("priority", Decimal("0.056")),
                   "resp_F": ("flex", Decimal("0.014")), "msg_B": ("batch", Decimal("0.00625")),
                   "x1": ("standard", None)}
    (rec,) = rows(home, "finance", "cost_reconciliation_daily", DAY)
    # x1 is unpriced: out of api_cost (0.028 + 0.056 + 0.014 + 0.00625) rather than in it at 0
    assert (rec["api_requests_priced"], rec["api_requests_unpriced"], rec["api_unpriced_share"]) == (4, 1, 0.2)
    assert rec["api_cost"] == Decimal("0.10425")
    assert rec["api_unpriced_reasons"] == "no price sheet mystery in cost policy p1: 1"
    costs = {r["deployment_id"]: r for r in rows(home, "finance", "cost_per_mtok_daily", DAY)}
    assert "mystery-api" not in costs and costs["gpt5-api"]["cost_api"] == Decimal("0.098")
    # a tolerance of a fifth of the requests lets the day through
    config = {"resources": {"ledger": {"config": {"home": str(home), "max_unpriced_share": 0.2}}}}
    assert materialize(DAY, upto=upto, run_config=config).success
