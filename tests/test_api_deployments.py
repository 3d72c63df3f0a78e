"""Hosted-API deployments: priced per token class from a price sheet, beside self-hosted ones, on a day worked
out by hand.

The conftest inventory gains two API deployments on 2026-11-16: claude-api (Anthropic, its sheet written in
costs.yaml: input 3, cache read 0.30, cache write 3.75, one-hour cache write 6, output 15 USD per 1M tokens; rate
limits 2 requests and 12,000 tokens per minute) and gpt-api (OpenAI, its sheet `gpt-4.1` read from a LiteLLM
price map: 2e-06, 5e-07 and 8e-06 USD per token for input, cache reads and output, no cache-write price).
The shared cost key is GPU-hours, so no shared cost reaches an API deployment. Every expected number is worked
out here from the rows written.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

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

API_DEPLOYMENTS = """\
  - deployment_id: claude-api
    model: claude
    kind: api
    provider: anthropic
    rate_limit_rpm: 2
    rate_limit_tpm: 12000
    valid_from: 2026-11-01
  - deployment_id: gpt-api
    model: gpt
    kind: api
    provider: openai
    price_sheet: gpt-4.1
    valid_from: 2026-11-01
"""

API_PRICES = """\
    litellm_price_map: prices.json
    api_prices:
      claude: {input_per_mtok: 3, cache_read_per_mtok: 0.30, cache_write_per_mtok: 3.75,
               cache_write_1h_per_mtok: 6, output_per_mtok: 15}
      gpt-4.1: {litellm: gpt-4.1}
"""

PRICE_MAP = {"gpt-4.1": {"input_cost_per_token": 2e-06, "cache_read_input_token_cost": 5e-07,
                         "output_cost_per_token": 8e-06, "litellm_provider": "openai", "mode": "chat"},
             "sample_spec": {"input_cost_per_token": 0}}

UNTIMED = {"ttft_ms": ..., "e2e_ms": ..., "queue_ms": ..., "itl_max_ms": ..., "latency_measured": False}


def _api_home(home: Path) -> None:
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML + API_DEPLOYMENTS)
    (home / "config" / "costs.yaml").write_text(COSTS_YAML + API_PRICES)
    (home / "config" / "prices.json").write_text(json.dumps(PRICE_MAP))


def _write_bill(home: Path, lines: list[tuple[str, str, str]]) -> None:
    """A FOCUS export of whole-day charges (EffectiveCost, ServiceCategory, the deployment tag) for DAY."""
    with (home / "raw" / "billing" / "focus.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "EffectiveCost", "BilledCost",
                    "BillingCurrency", "ChargeCategory", "ServiceCategory", "ServiceName", "ResourceId", "SkuId",
                    "Tags"])
        for cost, service, tag in lines:
            w.writerow([f"{DAY} 00:00:00", "2026-11-17 00:00:00", "2026-11-01 00:00:00", cost, cost, "USD", "Usage",
                        service, "svc", "r-1", "sku", json.dumps({"tokenledger:deployment": tag})])


def _materialized_home(factory: pytest.TempPathFactory, name: str, write: Callable[[Path], None]) -> Iterator[Path]:
    """A home of its own, written by `write` and materialized once for the module's tests."""
    from tests.conftest import SLO_YAML

    mp = pytest.MonkeyPatch()
    home = factory.mktemp(name) / "home"
    (home / "config").mkdir(parents=True)
    (home / "raw" / "billing").mkdir(parents=True)
    (home / "config" / "slo.yaml").write_text(SLO_YAML)
    mp.setenv("TOKENLEDGER_HOME", str(home))
    write(home)
    result = materialize(DAY)
    assert result.success, failure_text(result)
    yield home
    mp.undo()


def _write_day(home: Path) -> None:
    _api_home(home)
    claude = {"model": "claude", "deployment_id": "claude-api"}
    write_jsonl(gateway_dir(home, DAY) / "api.jsonl", [
        # c1, team-a, a usage log without latency: 10,000 input = 6,000 cache reads + 2,000 cache writes (500 of
        # them one-hour) + 2,000 uncached; 400 output (reasoning inside). Not judged against the SLO.
        request("c1", **claude, received_at="2026-11-16T10:00:05Z", input_tokens=10000, cached_input_tokens=6000,
                cache_write_tokens=2000, cache_write_1h_tokens=500, output_tokens=400, reasoning_tokens=150,
                **UNTIMED),
        # c2, team-b, timed and within the SLO (TTFT 300 ms <= 1,000 ms in 0-4k): 2,000 uncached input, 100 output.
        request("c2", **claude, tenant_id="team-b", received_at="2026-11-16T10:00:40Z", input_tokens=2000,
                cached_input_tokens=0, output_tokens=100),
        # c3, team-b, rejected by the provider (429): never reached the model, never billed; counts for RPM.
        request("c3", **claude, tenant_id="team-b", received_at="2026-11-16T10:00:50Z", status="rejected",
                http_status=429, input_tokens=500, cached_input_tokens=0, output_tokens=0, ttft_ms=...,
                e2e_ms=..., queue_ms=..., itl_max_ms=...),
        # g1, team-a, an OpenAI usage object: 3,000 input of which 1,000 cached; 200 output.
        request("g1", model="gpt", deployment_id="gpt-api", received_at="2026-11-16T11:00:00Z", input_tokens=3000,
                cached_input_tokens=1000, output_tokens=200, **UNTIMED),
        # a self-hosted request beside them
        request("m1"),
    ])
    _write_bill(home, [
        ("480.00", "Compute", "m70-h100"),  # GPU for m70, tagged: allocated to m70-h100
        # An Anthropic invoice line tagged to claude-api: its cost is the price sheet's, so the line is unallocated.
        ("5.00", "AI and Machine Learning", "claude-api"),
    ])


@pytest.fixture(scope="module")
def api_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One day with API and self-hosted deployments, materialized once for the whole module."""
    yield from _materialized_home(tmp_path_factory, "api", _write_day)


# Claude's token classes over its reached requests (c1, c2): uncached 2,000 + 2,000 = 4,000; cache reads 6,000;
# cache writes 1,500 five-minute + 500 one-hour; output 500.
CLAUDE_COST = (Decimal(4000) * 3 + Decimal(6000) * Decimal("0.30") + Decimal(1500) * Decimal("3.75")
               + Decimal(500) * 6 + Decimal(500) * 15) / 10**6  # 0.012 + 0.0018 + 0.005625 + 0.003 + 0.0075
# GPT: uncached 2,000 at 2, cache reads 1,000 at 0.5, output 200 at 8 (the map's per-token prices times 1e6).
GPT_COST = (Decimal(2000) * 2 + Decimal(1000) * Decimal("0.5") + Decimal(200) * 8) / 10**6


def test_api_cost_per_mtok_by_token_class(api_day: Path) -> None:
    assert Decimal("0.029925") == CLAUDE_COST and Decimal("0.0061") == GPT_COST
    by_dep = {r["deployment_id"]: r for r in rows(api_day, "finance", "cost_per_mtok_daily", DAY)}
    claude, gpt = by_dep["claude-api"], by_dep["gpt-api"]
    assert claude["kind"] == "api" and by_dep["m70-h100"]["kind"] == "gpu"
    # GPU figures are null for an API deployment, never zero
    assert (claude["gpu_type"], claude["gpus"], claude["cost_gpu"]) == (None, None, None)
    assert claude["cost_api"] == claude["cost_total"] == CLAUDE_COST
    assert gpt["cost_api"] == gpt["cost_total"] == GPT_COST
    assert by_dep["m70-h100"]["cost_api"] is None
    assert (claude["input_total"], claude["input_cached"], claude["input_recomputed"], claude["input_cache_write"]) \
        == (12000, 6000, 6000, 2000)
    # per token class, the sheet's prices: cache read 0.30; recomputed input (2,000 + 2,000 uncached at 3, 1,500
    # writes at 3.75, 500 at 6) = 20,625 / 6,000 = 3.4375; cache writes 8,625 / 2,000 = 4.3125; output 15
    assert claude["unit_cost_cached_per_mtok"] == pytest.approx(0.30)
    assert claude["unit_cost_recomputed_per_mtok"] == pytest.approx(3.4375)
    assert claude["unit_cost_cache_write_per_mtok"] == pytest.approx(4.3125)
    assert claude["unit_cost_output_per_mtok"] == pytest.approx(15)
    # delivered: 500 output tokens; under SLO: only c2 (100 tokens) was judged and compliant
    assert claude["cost_per_mtok_output"] == pytest.approx(0.029925 / 500 * 1e6)
    assert claude["cost_per_mtok_goodput"] == pytest.approx(0.029925 / 100 * 1e6)
    # gpt: no request was judged, so nothing is known to be under SLO: NULL, not zero
    assert gpt["compliant_output_tokens"] == 0 and gpt["cost_per_mtok_goodput"] is None
    assert gpt["price_sheet"] == "gpt-4.1" and gpt["unit_cost_output_per_mtok"] == pytest.approx(8)


def test_api_tenant_showback_prices_each_tenant_s_classes(api_day: Path) -> None:
    shares = {r["tenant_id"]: r for r in rows(api_day, "finance", "tenant_showback_daily", DAY, "model = 'claude'")}
    # team-a (c1): 2,000 uncached * 3 + 6,000 * 0.30 + 1,500 * 3.75 + 500 * 6 + 400 * 15 = 22,425 (per 1e6)
    # team-b (c2): 2,000 * 3 + 100 * 15 = 7,500; the two add up to the model's 29,925
    assert shares["team-a"]["cost"] == Decimal("0.022425")
    assert shares["team-b"]["cost"] == Decimal("0.0075")
    assert shares["team-a"]["input_cache_write"] == 2000


def test_api_reconciliation_lists_api_cost_apart_and_the_bill_balances(api_day: Path) -> None:
    (rec,) = rows(api_day, "finance", "cost_reconciliation_daily", DAY)
    assert rec["billed_effective_cost"] == Decimal("485")
    assert rec["allocated_cost"] == Decimal("480")  # m70's tagged line
    assert rec["unallocated_cost"] == Decimal("5")  # the invoice line tagged to claude-api
    assert rec["balanced"] is True
    assert rec["api_cost"] == CLAUDE_COST + GPT_COST
    assert rec["deployment_cost"] == Decimal("480") + rec["rate_card_cost"] + CLAUDE_COST + GPT_COST
    (line,) = rows(api_day, "core", "cost_lines", DAY, "source = 'focus' AND deployment_id IS NULL")
    assert line["placement"] == "unallocated"
    assert "hosted-API deployment" in line["placement_reason"]


def test_api_tokens_and_slo_judge_only_timed_requests(api_day: Path) -> None:
    split = {r["model"]: r for r in rows(api_day, "infra", "token_split_daily", DAY)}
    assert (split["claude"]["input_total"], split["claude"]["input_cached"], split["claude"]["input_cache_write"]) \
        == (12000, 6000, 2000)
    slo = {r["model"]: r for r in rows(api_day, "infra", "slo_daily", DAY, "isl_bucket = 'all'")}
    # claude: c1, c2, c3 are effective; c1 carries no latency and is not judged; c2 is judged and compliant; c3 is
    # judged and not compliant (a rejected request is a failure, whatever its latency)
    assert (slo["claude"]["effective_requests"], slo["claude"]["judged_requests"],
            slo["claude"]["compliant_requests"]) == (3, 2, 1)
    assert slo["claude"]["attainment"] == pytest.approx(0.5)
    assert (slo["gpt"]["judged_requests"], slo["gpt"]["attainment"]) == (0, None)


def test_api_peak_minute_against_rate_limits(api_day: Path) -> None:
    (hour10,) = rows(api_day, "infra", "load_hourly", DAY, "model = 'claude' AND hour = 10")
    # minute 10:00 holds c1, c2, c3: 3 requests > 2 rpm; tokens of reached ones 10,400 + 2,100 = 12,500 > 12,000
    assert (hour10["peak_minute_requests"], hour10["peak_minute_tokens"]) == (3, 12500)
    assert (hour10["rate_limit_rpm"], hour10["rate_limit_tpm"]) == (2, 12000)
    assert hour10["peak_minute_rpm_utilization"] == pytest.approx(1.5)
    assert hour10["over_rate_limit"] is True
    (gpt11,) = rows(api_day, "infra", "load_hourly", DAY, "model = 'gpt' AND hour = 11")
    assert gpt11["rate_limit_tpm"] is None and gpt11["over_rate_limit"] is None


def _config_error(home: Path) -> str:
    import duckdb

    from tokenledger.config import load_config
    from tokenledger.errors import ConfigError
    from tokenledger.storage.layout import HomeLayout

    with pytest.raises(ConfigError) as caught:
        load_config(duckdb.connect(), HomeLayout.of(home))
    return str(caught.value)


def test_an_api_deployment_with_gpu_fields_is_refused(home: Path) -> None:
    _api_home(home)
    path = home / "config" / "deployments.yaml"
    path.write_text(path.read_text().replace("    provider: openai\n", "    provider: openai\n    gpus: 8\n"))
    assert "api_has_no_gpus: an API deployment (kind api) runs on no GPUs of ours" in _config_error(home)


def test_an_api_deployment_needs_a_provider(home: Path) -> None:
    _api_home(home)
    path = home / "config" / "deployments.yaml"
    path.write_text(path.read_text().replace("    provider: anthropic\n", ""))
    # the claude-api entry starts on line 60, right after the 59 lines of the conftest inventory
    assert f"{path} line 60: provider: required when kind == 'api'" in _config_error(home)


def test_a_price_sheet_naming_what_the_litellm_map_lacks(home: Path) -> None:
    _api_home(home)
    path = home / "config" / "costs.yaml"
    path.write_text(path.read_text().replace("{litellm: gpt-4.1}", "{litellm: gpt-9}"))
    assert "the price sheet gpt-4.1 names 'gpt-9', which the LiteLLM price map prices.json does not have" \
        in _config_error(home)


def test_a_litellm_price_map_outside_the_config_folder_is_refused(home: Path) -> None:
    _api_home(home)
    path = home / "config" / "costs.yaml"
    path.write_text(path.read_text().replace("litellm_price_map: prices.json", "litellm_price_map: ../prices.json"))
    assert "litellm_price_map '../prices.json' is not a file in" in _config_error(home)


def _litellm_record(rid: str, **fields: object) -> dict[str, object]:
    """A LiteLLM_SpendLogs row as a JSON Lines export writes it (LiteLLM 1.110: zone-less UTC times)."""
    record = {"request_id": rid, "call_type": "acompletion", "model": "claude-sonnet-4-5-20250929",
              "model_group": "claude", "custom_llm_provider": "anthropic", "startTime": "2026-11-16 09:00:00",
              "completionStartTime": "2026-11-16 09:00:00.400", "endTime": "2026-11-16 09:00:02",
              "team_id": "team-c", "status": "success", "messages": [{"role": "user", "content": "secret"}]}
    record.update(fields)
    return record


@pytest.fixture(scope="module")
def mixed_day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Canonical logs for a self-hosted model, a LiteLLM spend log for an API model and a FOCUS bill, one day."""
    yield from _materialized_home(tmp_path_factory, "mixed", _write_mixed_day)


def _write_mixed_day(home: Path) -> None:
    _api_home(home)
    write_jsonl(gateway_dir(home, DAY) / "gateway.jsonl", [request("m1"), request("m2", tenant_id="team-c")])
    write_jsonl(home / "raw" / "litellm" / f"dt={DAY}" / "spend.jsonl", [
        # 5,000 prompt tokens including 3,000 cache reads and 1,000 cache writes; 200 output; TTFT 400 ms; LiteLLM
        # says it cost 0.02
        _litellm_record("chatcmpl-1", prompt_tokens=5000, completion_tokens=200, spend=0.02,
                        metadata={"usage_object": {"cache_read_input_tokens": 3000,
                                                   "cache_creation_input_tokens": 1000}}),
        # a 429 from the provider: rejected, no usage
        _litellm_record("chatcmpl-2", status="failure", prompt_tokens=0, completion_tokens=0, spend=0,
                        completionStartTime=None,
                        metadata={"error_information": {"error_code": "429", "error_class": "RateLimitError"}}),
    ])
    _write_bill(home, [("480.00", "Compute", "m70-h100"), ("10.00", "Networking", "shared"),
                       ("7.00", "AI and Machine Learning", "claude-api")])


def test_a_mixed_day_publishes_one_consistent_set_of_finance_tables(mixed_day: Path) -> None:
    # claude-api from the LiteLLM log: uncached 5,000 - 3,000 - 1,000 = 1,000 * 3 + 3,000 * 0.30 + 1,000 * 3.75
    # + 200 * 15 = 10,650 per 1M = 0.01065 USD; the 429 reached no model and costs nothing
    claude_cost = Decimal("0.01065")
    (rec,) = rows(mixed_day, "finance", "cost_reconciliation_daily", DAY)
    # the bill: 480 (m70, tagged) + 10 (shared, spread over GPU-hours: API deployments have none) + 7 (tagged to
    # claude-api: unallocated, its cost is the price sheet's) = 497 = 490 allocated + 7 unallocated
    assert (rec["billed_effective_cost"], rec["allocated_cost"], rec["unallocated_cost"]) \
        == (Decimal("497"), Decimal("490"), Decimal("7"))
    assert rec["balanced"] is True and rec["api_cost"] == claude_cost
    costs = {r["deployment_id"]: r for r in rows(mixed_day, "finance", "cost_per_mtok_daily", DAY)}
    claude = costs["claude-api"]
    assert claude["cost_total"] == claude["cost_api"] == claude_cost
    assert (claude["input_total"], claude["input_cached"], claude["input_cache_write"], claude["output_tokens"]) \
        == (5000, 3000, 1000, 200)
    # LiteLLM's own spend is kept beside: 0.02, 0.00935 above tokenledger's figure
    assert claude["source_cost"] == Decimal("0.02")
    assert claude["source_cost_difference"] == Decimal("-0.00935")
    # LiteLLM measures latency: judged, TTFT 400 ms within 2,500 ms (4k+ bucket), so under SLO
    assert claude["compliant_output_tokens"] == 200
    assert claude["cost_per_mtok_goodput"] == pytest.approx(0.01065 / 200 * 1e6)
    assert costs["m70-h100"]["kind"] == "gpu" and costs["m70-h100"]["source_cost"] is None
    assert sum(r["cost_total"] for r in costs.values()) == rec["deployment_cost"]
    # team-c used both: its showback rows carry both models, each costed its own way
    team_c = {r["model"]: r["cost"] for r in rows(mixed_day, "finance", "tenant_showback_daily", DAY,
                                                  "tenant_id = 'team-c'")}
    assert team_c["claude"] == claude_cost and team_c["m70"] > 0
    reconciliation = {r["source"]: r for r in rows(mixed_day, "quality", "ingest_reconciliation_daily", DAY)}
    assert (reconciliation["litellm"]["rows_read"], reconciliation["litellm"]["rows_accepted"]) == (2, 2)
    assert all(r["balanced"] for r in reconciliation.values())


def test_a_hosted_deployment_with_no_request_is_counted_not_warned(home: Path) -> None:
    """gpt-api (hosted) and m8-onprem, moe-a and moe-b (self-hosted) serve nothing on the day: only the self-hosted
    are warned about, as logs that may never have arrived; gpt-api is counted in the check's metadata (an unused
    API costs nothing)."""
    _api_home(home)
    write_jsonl(gateway_dir(home, DAY) / "day.jsonl", [
        request("m1"), request("c1", model="claude", deployment_id="claude-api", **UNTIMED)])
    result = materialize(DAY, upto=["core/gateway_requests"])
    assert result.success, failure_text(result)
    (check,) = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
                and e.event_specific_data.asset_check_key.name == "deployments_with_requests"]
    assert not check.passed
    assert check.description == (
        "self-hosted deployments in force with no request that day: 2026-11-16 m8-onprem (model m8); 2026-11-16 "
        "moe-a (model moe); 2026-11-16 moe-b (model moe). If they served traffic, their logs are missing: land them "
        "and re-run the day.")
    assert (check.metadata["deployments_without_requests"].value,
            check.metadata["api_deployments_without_requests"].value) == (3, 1)
