"""The providers' own cost exports against tokenledger's prices (finance.provider_cost_reconciliation_daily): an
Anthropic cost report by model and tier whose batch figure differs from tokenledger's by a known amount, and an
OpenAI Costs API page without line items, compared as the provider's whole day. Prices: the sheets of
tests/test_api_pricing.py (opus on the sheet `whole`, GPT-5 from LiteLLM's map)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import failure_text, gateway_dir, materialize, request, rows, write_jsonl
from tests.test_api_pricing import _home

DAY = "2026-11-16"
DAY_START = 1794787200  # 2026-11-16T00:00:00Z

ANTHROPIC = {"data": [
    {"starting_at": "2026-11-16T00:00:00Z", "ending_at": "2026-11-17T00:00:00Z", "results": [
        # amounts in cents: 2.5 cents = 0.025 USD for opus at batch, 7.5 cents = 0.075 USD at standard
        {"currency": "USD", "amount": "2.5", "workspace_id": None, "description": "Claude Opus Batch Usage",
         "cost_type": "tokens", "context_window": "0-200k", "model": "opus", "service_tier": "batch",
         "token_type": "uncached_input_tokens"},
        {"currency": "USD", "amount": "7.5", "workspace_id": None, "description": "Claude Opus Usage",
         "cost_type": "tokens", "context_window": "0-200k", "model": "opus", "service_tier": "standard",
         "token_type": "uncached_input_tokens"}]},
    # the next day's bucket: not this day's
    {"starting_at": "2026-11-17T00:00:00Z", "ending_at": "2026-11-18T00:00:00Z", "results": [
        {"currency": "USD", "amount": "999", "model": "opus", "service_tier": "standard"}]}],
    "has_more": False, "next_page": None}
OPENAI = {"object": "page", "data": [{"object": "bucket", "start_time": DAY_START, "end_time": DAY_START + 86400,
                                      "results": [{"object": "organization.costs.result",
                                                   "amount": {"value": 0.028, "currency": "usd"},
                                                   "line_item": None, "project_id": None}]}],
          "has_more": False, "next_page": None}


@pytest.fixture(scope="module")
def reconciled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    home = _home(tmp_path_factory.mktemp("provider") / "home")
    mp.setenv("TOKENLEDGER_HOME", str(home))
    write_jsonl(gateway_dir(home, DAY) / "api.jsonl", [
        # GPT-5 standard: 6,000 * 1.25 + 4,000 * 0.125 + 2,000 * 10 = 28,000 per 1M = 0.028
        request("g1", model="gpt5", deployment_id="gpt5-api", input_tokens=10_000, cached_input_tokens=4_000,
                output_tokens=2_000),
        # opus served at batch (the log says so): 4,000 * 2.5 + 15,000 * 0.25 + 1,000 * 3.125 + 500 * 12.5
        # = 23,125 per 1M = 0.023125
        request("o1", model="opus", deployment_id="wr-api", service_tier="batch", input_tokens=20_000,
                cached_input_tokens=15_000, cache_write_tokens=1_000, output_tokens=500),
        # opus standard: 10,000 * 5 + 1,000 * 25 = 75,000 per 1M = 0.075
        request("o2", model="opus", deployment_id="wr-api", input_tokens=10_000, cached_input_tokens=0,
                output_tokens=1_000),
    ])
    folder = home / "raw" / "provider_costs"
    folder.mkdir(parents=True)
    (folder / "anthropic-2026-11.json").write_text(json.dumps(ANTHROPIC))
    (folder / "anthropic-2026-11-again.json").write_text(json.dumps(ANTHROPIC))  # the same page saved twice
    (folder / "openai-2026-11.json").write_text(json.dumps(OPENAI))
    result = materialize(DAY, upto=["finance/provider_cost_reconciliation_daily"])
    assert result.success, failure_text(result)
    (home / "warnings.json").write_text(json.dumps(_failed_checks(result)))
    yield home
    mp.undo()


def _failed_checks(result: object) -> dict[str, str]:
    """The provider comparison's checks that did not pass, each with its description."""
    return {e.event_specific_data.asset_check_key.name: e.event_specific_data.description
            for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
            and not e.event_specific_data.passed
            and e.event_specific_data.asset_check_key.asset_key.to_user_string()
            == "finance/provider_cost_reconciliation_daily"}


def test_the_provider_figure_beside_tokenledger_s_and_the_difference(reconciled: Path) -> None:
    got = {(r["provider"], r["model"], r["service_tier"]): r
           for r in rows(reconciled, "finance", "provider_cost_reconciliation_daily", DAY)}
    assert set(got) == {("anthropic", "opus", "batch"), ("anthropic", "opus", "standard"), ("openai", None, None)}
    batch = got[("anthropic", "opus", "batch")]
    # 0.023125 - 0.025 = -0.001875, 7.5% of the provider's figure: beyond the 1% tolerance (the page saved twice
    # counts once, the next day's bucket not at all)
    assert (batch["provider_cost"], batch["tokenledger_cost"], batch["difference"]) \
        == (Decimal("0.025"), Decimal("0.023125"), Decimal("-0.001875"))
    assert batch["within_tolerance"] is False
    standard = got[("anthropic", "opus", "standard")]
    assert (standard["provider_cost"], standard["difference"], standard["within_tolerance"]) \
        == (Decimal("0.075"), Decimal("0"), True)
    # OpenAI's page has no line items: its whole day, 0.028, against GPT-5's 0.028
    whole = got[("openai", None, None)]
    assert (whole["provider_cost"], whole["tokenledger_cost"], whole["within_tolerance"]) \
        == (Decimal("0.028"), Decimal("0.028"), True)
    assert whole["provider_files"].endswith("openai-2026-11.json")


def test_a_difference_beyond_the_tolerance_is_flagged_by_the_contract(reconciled: Path) -> None:
    # the warning rule of the contract fails on the one row out of tolerance; the day is published all the same
    warnings = json.loads((reconciled / "warnings.json").read_text())
    assert list(warnings) == ["contract_warnings"]
    assert "provider_figure_within_tolerance" in warnings["contract_warnings"]


# --- pages that cannot be compared (issue 56: they crashed the day naming no file, or gave 0 rows silently) ---------

UNREAD = {
    "anthropic-locale.json": ({"data": [{"starting_at": "2026-11-16T00:00:00Z", "results": [
        {"amount": "3", "currency": "USD"}, {"amount": "1,234.50", "currency": "USD"}]}]},
        'data[0].results[1]: the amount "1,234.50" is not a number, or is beyond 10^26 (Anthropic writes a decimal '
        'string in cents, e.g. "123.45")'),
    "anthropic-overflow.json": ({"data": [{"starting_at": "2026-11-16T00:00:00Z", "results": [{"amount": "1e40"}]}]},
                                'data[0].results[0]: the amount "1e40" is not a number, or is beyond 10^26 (Anthropic '
                                'writes a decimal string in cents, e.g. "123.45")'),
    "openai-text.json": ({"object": "page", "data": [{"start_time": DAY_START, "results": [
        {"amount": {"value": "abc", "currency": "usd"}}, {"amount": {}}]}]},
        'data[0].results[0]: the amount "abc" is not a number, or is beyond 10^26 (OpenAI writes amount.value as a '
        'JSON number, e.g. 1.2345)'),
    "anthropic-time.json": ({"data": [{"starting_at": "yesterday", "results": []}]},
                            'data[0].starting_at: "yesterday" is not a time (an ISO 8601 timestamp, e.g. '
                            '"2026-11-16T00:00:00Z")'),
    "openai-time.json": ({"object": "page", "data": [{"start_time": "noon", "results": []}]},
                         'data[0].start_time: "noon" is not a time (Unix seconds, e.g. 1794787200)'),
    # an amount in no currency could be neither compared nor set apart in its own currency's row
    "anthropic-currency.json": ({"data": [{"starting_at": "2026-11-16T00:00:00Z", "results": [
        {"amount": "3", "currency": "USD"}, {"amount": "4", "currency": None}]}]},
        'data[0].results[1]: the currency is missing (Anthropic writes "currency": "USD" beside each amount)'),
    "openai-currency.json": ({"object": "page", "data": [{"start_time": DAY_START, "results": [
        {"amount": {"value": 1.5}}]}]},
        'data[0].results[0]: amount.currency is missing (OpenAI writes "amount": {"value": 1.2345, "currency": '
        '"usd"})'),
    "openai-dollar.json": ({"object": "page", "data": [{"start_time": DAY_START, "results": [
        {"amount": {"value": 1.5, "currency": "US$"}}]}]},
        'data[0].results[0]: the currency "US$" is not a three-letter code (ISO 4217, e.g. "USD")'),
    "list.json": ([1, 2], "a JSON number where a page (an object) belongs"),
    "usage.json": ({"object": "list", "usage": []}, "no data array of buckets"),
    "buckets.json": ({"data": [{"start": 1}]},
                     "its buckets have neither starting_at (Anthropic) nor start_time (OpenAI)"),
}


def test_each_page_that_cannot_be_compared_is_named_with_why(tmp_path: Path) -> None:
    """The rule on a small table: each file's first reason (the good pages and a page of no bucket give none)."""
    import duckdb

    from tokenledger.storage.duck import run_sql

    for name, (page, _) in UNREAD.items():
        (tmp_path / name).write_text(json.dumps(page))
    for name, page in (("anthropic.json", ANTHROPIC), ("openai.json", OPENAI), ("none.json", {"data": []})):
        (tmp_path / name).write_text(json.dumps(page))
    with duckdb.connect() as con:
        con.execute("CREATE TEMP TABLE day_provider_cost_pages AS SELECT filename AS file, json AS page "
                    "FROM read_json_objects($f, format = 'auto', filename = true)",
                    {"f": [str(p) for p in sorted(tmp_path.iterdir())]})
        found: dict[str, str] = {}
        for file, problem in run_sql(con, "provider_cost_pages_unread").fetchall():
            found.setdefault(Path(file).name, problem)
    assert found == {name: said for name, (_, said) in UNREAD.items()}


def _rerun_with_page(reconciled: Path, tmp_path: Path, name: str, text: str, *more: tuple[str, str],
                     drop: tuple[str, ...] = ()) -> tuple[Path, object]:
    """A copy of the module's home (its inputs only) with one more page `name` in raw/provider_costs/ (and the
    pages `more`, as (name, text), but without the module's pages named in `drop`), and the day's run up to the
    provider comparison."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(reconciled, home, ignore=shutil.ignore_patterns("lake", "exports", ".dagster"))
    folder = home / "raw" / "provider_costs"
    for page in drop:
        (folder / page).unlink()
    for page, page_text in ((name, text), *more):
        (folder / page).write_text(page_text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(home))
        return home, materialize(DAY, upto=["finance/provider_cost_reconciliation_daily"])


def test_a_page_that_cannot_be_compared_stops_the_day_naming_the_file_and_the_formats(reconciled: Path,
                                                                                     tmp_path: Path) -> None:
    home, result = _rerun_with_page(reconciled, tmp_path, "anthropic-2026-11-17.json", "")
    empty = home / "raw" / "provider_costs" / "anthropic-2026-11-17.json"
    assert not result.success
    assert failure_text(result).endswith(
        f"{empty}: holds no JSON document (an empty file), so the provider's cost cannot be compared. A file is one "
        "page of Anthropic's cost report (GET /v1/organizations/cost_report: data[] buckets with starting_at and "
        "results[]) or of OpenAI's Costs API (GET /v1/organization/costs: object page, data[] buckets with "
        "start_time and results[]), as JSON. Save each page as the API returned it, one file per page, then re-run "
        "the day."), failure_text(result)


def test_results_of_equal_amount_that_differ_in_any_field_are_two_costs(reconciled: Path, tmp_path: Path) -> None:
    """Issue 56: two pages of equal amount but another workspace (or token type, description, project) were
    merged into one as if the same page had been saved twice. The same page saved twice still counts once
    (the module's home has anthropic-2026-11.json twice): opus at standard is 7.5 cents there; a page of another
    workspace with the same 7.5 cents adds its own, 0.075 + 0.075 = 0.15 USD."""
    other = json.loads(json.dumps(ANTHROPIC))
    for bucket in other["data"]:
        for entry in bucket["results"]:
            entry["workspace_id"] = "wrkspc_other"
    home, result = _rerun_with_page(reconciled, tmp_path, "anthropic-2026-11-other-workspace.json",
                                    json.dumps(other))
    assert result.success, failure_text(result)
    got = {(r["provider"], r["model"], r["service_tier"]): r["provider_cost"]
           for r in rows(home, "finance", "provider_cost_reconciliation_daily", DAY)}
    assert got[("anthropic", "opus", "standard")] == Decimal("0.15")
    assert got[("anthropic", "opus", "batch")] == Decimal("0.05")


# --- one currency per comparison, every page landed (issue 56: another currency, a missing currency or has_more
# true left rows unreconciled while the check passed) ------------------------------------------------------------

def _openai_page(*buckets: tuple[int, list[dict]], has_more: bool = False, next_page: str | None = None) -> str:
    """An OpenAI Costs API page of whole-day buckets, each (start, results), results without line items."""
    return json.dumps({"object": "page", "data": [
        {"object": "bucket", "start_time": start, "end_time": start + 86400, "results": [
            {"object": "organization.costs.result", "line_item": None, "project_id": None, **r} for r in results]}
        for start, results in buckets], "has_more": has_more, "next_page": next_page})


def test_a_result_in_another_currency_is_set_apart_named_and_flagged(reconciled: Path, tmp_path: Path) -> None:
    """The cost policy prices in USD. A second OpenAI page of the day: 12.472 USD and 3.00 EUR. The USD figure
    compared is the module's page's 0.028 + 12.472 = 12.50 (not 15.50: no exchange rate, nothing summed across
    currencies); the 3.00 EUR is its own row, counted and named by file and position on it and on the USD row, and
    the contract's warning rule fails naming it."""
    home, result = _rerun_with_page(reconciled, tmp_path, "openai-2026-11-16-eur.json", _openai_page(
        (DAY_START, [{"amount": {"value": 12.472, "currency": "usd"}},
                     {"amount": {"value": 3.00, "currency": "eur"}}])))
    assert result.success, failure_text(result)
    page = home / "raw" / "provider_costs" / "openai-2026-11-16-eur.json"
    got = {r["currency"]: r for r in rows(home, "finance", "provider_cost_reconciliation_daily", DAY,
                                          where="provider = 'openai'")}
    assert set(got) == {"USD", "EUR"}
    usd, eur = got["USD"], got["EUR"]
    # 0.028 - 12.50 = -12.472
    assert (usd["provider_cost"], usd["tokenledger_cost"], usd["difference"], usd["results_not_compared"]) \
        == (Decimal("12.5"), Decimal("0.028"), Decimal("-12.472"), 0)
    assert usd["not_compared"] == ("1 result(s) of the provider in EUR are not in provider_cost (their own row has "
                                   f"them): {page} data[0].results[1]")
    assert (eur["provider_cost"], eur["tokenledger_cost"], eur["difference"], eur["within_tolerance"],
            eur["results_not_compared"], eur["incomplete_pages"]) == (Decimal("3"), None, None, None, 1, 0)
    assert eur["not_compared"] == ("1 result(s) in EUR not compared: tokenledger prices in USD (the currency of "
                                   f"the cost policy) and applies no exchange rate: {page} data[0].results[1]")
    # Anthropic's rows lack nothing
    assert [r["not_compared"] for r in rows(home, "finance", "provider_cost_reconciliation_daily", DAY,
                                            where="provider = 'anthropic'")] == [None, None]
    warning = _failed_checks(result)["contract_warnings"]
    assert "provider_figures_all_compared" in warning and "2 of 4 row(s) fail" in warning, warning
    assert f"{page} data[0].results[1]" in warning, warning


def test_a_result_without_a_currency_stops_the_day_naming_file_position_and_rule(reconciled: Path,
                                                                                tmp_path: Path) -> None:
    home, result = _rerun_with_page(reconciled, tmp_path, "openai-2026-11-16.json", _openai_page(
        (DAY_START, [{"amount": {"value": 0.5, "currency": "usd"}}, {"amount": {"value": 0.25}}])))
    page = home / "raw" / "provider_costs" / "openai-2026-11-16.json"
    assert not result.success
    said = failure_text(result)
    assert said.endswith(
        f"{page}: data[0].results[1]: amount.currency is missing (OpenAI writes \"amount\": {{\"value\": 1.2345, "
        "\"currency\": \"usd\"}), so the provider's cost cannot be compared. A file is one page of Anthropic's cost "
        "report (GET /v1/organizations/cost_report: data[] buckets with starting_at and results[]) or of OpenAI's "
        "Costs API (GET /v1/organization/costs: object page, data[] buckets with start_time and results[]), as JSON. "
        "Save each page as the API returned it, one file per page, then re-run the day."), said
    assert "\n" not in said and "Traceback" not in said


def test_a_file_larger_than_any_page_is_refused_before_it_is_read(reconciled: Path, tmp_path: Path) -> None:
    # 17 MiB of one page: no cost API returns such a page (the reader's object limit is 16 MiB)
    text = _openai_page((DAY_START, [{"amount": {"value": 0.5, "currency": "usd"}, "line_item": "x" * 17 * 2**20}]))
    home, result = _rerun_with_page(reconciled, tmp_path, "openai-huge.json", text)
    page = home / "raw" / "provider_costs" / "openai-huge.json"
    assert not result.success
    said = failure_text(result)
    assert f"{page}: {page.stat().st_size:,} bytes, more than a page of a cost API holds (tokenledger reads a page " \
        "of at most 16 MiB)." in said and said.endswith("then re-run the day."), said
    assert "\n" not in said and "Traceback" not in said


def test_a_page_with_more_whose_next_page_is_not_landed_leaves_the_day_flagged(reconciled: Path,
                                                                               tmp_path: Path) -> None:
    """OpenAI's day is only in a first page: the 14th and 15th (1.00 USD each), has_more true, next page
    page_AAAA not landed. The 16th's bucket would be in that next page: no figure of OpenAI's for the 16th, and
    tokenledger's GPT-5 0.028 stands beside nothing, its row saying why. Anthropic's rows are untouched."""
    home, result = _rerun_with_page(reconciled, tmp_path, "openai-p1.json", _openai_page(
        (DAY_START - 2 * 86400, [{"amount": {"value": 1.0, "currency": "usd"}}]),
        (DAY_START - 86400, [{"amount": {"value": 1.0, "currency": "usd"}}]),
        has_more=True, next_page="page_AAAA"), drop=("openai-2026-11.json",))
    assert result.success, failure_text(result)
    page = home / "raw" / "provider_costs" / "openai-p1.json"
    openai = rows(home, "finance", "provider_cost_reconciliation_daily", DAY, where="provider = 'openai'")
    assert [(r["provider_cost"], r["tokenledger_cost"], r["within_tolerance"], r["incomplete_pages"])
            for r in openai] == [(None, Decimal("0.028"), None, 1)]
    said = (f'{page}: has_more is true and the next page (next_page "page_AAAA", buckets from 2026-11-16T00:00:00Z) '
            "is not landed, so the provider figure of the day is incomplete: land every page")
    assert openai[0]["not_compared"] == said
    warning = _failed_checks(result)["contract_warnings"]
    assert "provider_figures_all_compared" in warning and said in warning, warning


def test_a_page_with_more_whose_next_page_is_landed_is_complete(reconciled: Path, tmp_path: Path) -> None:
    """The same first page and its next one (the 16th, 0.028 USD, and the 17th; has_more false): the 16th is
    compared as a whole day, 0.028 against 0.028, and nothing is flagged. (Had only the first page's 15th been
    asked for, the 16th still counts from the next page alone.)"""
    home, result = _rerun_with_page(
        reconciled, tmp_path, "openai-p1.json", _openai_page(
            (DAY_START - 86400, [{"amount": {"value": 1.0, "currency": "usd"}}]), has_more=True,
            next_page="page_AAAA"),
        ("openai-p2.json", _openai_page((DAY_START, [{"amount": {"value": 0.028, "currency": "usd"}}]),
                                        (DAY_START + 86400, [{"amount": {"value": 5.0, "currency": "usd"}}]))),
        drop=("openai-2026-11.json",))
    assert result.success, failure_text(result)
    openai = rows(home, "finance", "provider_cost_reconciliation_daily", DAY, where="provider = 'openai'")
    assert [(r["model"], r["provider_cost"], r["tokenledger_cost"], r["within_tolerance"], r["incomplete_pages"],
             r["not_compared"]) for r in openai] == [(None, Decimal("0.028"), Decimal("0.028"), True, 0, None)]
    assert "provider_figures_all_compared" not in _failed_checks(result).get("contract_warnings", "")
