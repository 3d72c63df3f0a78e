"""Cost allocation, cost per 1M tokens, tenant showback and reconciliation of one UTC day (docs/metrics.md, 4).

Everything is computed in the step's DuckDB by the SQL file named after each table; Python only attaches the day's
inputs as views, resolves the cost policy in force and stops the day when the configuration cannot cost it. The
steps, each a table in the lake:

- `core.cost_lines` (sql/cost/cost_lines.sql): every FOCUS row of the day and a rate-card row per on-premises
  deployment version (sql/cost/rate_card_charges.sql), each placed on a deployment, shared or unallocated, and given
  a category;
- `core.cost_allocation_daily`: the lines summed per deployment and category, shared lines spread by the policy's
  key (sql/cost/cost_shared_key.sql);
- `finance.cost_per_mtok_daily`, `finance.tenant_showback_daily`, `finance.cost_reconciliation_daily`;
- `focus.cost_and_usage_daily`: the showback as a FinOps FOCUS 1.2 dataset, split further by deployment and token
  class with the showback's own weights.

Money stays DECIMAL(38,12) from the bill to the published cost columns. Decisions: docs/adr/README.md,
"Cost" (0048-0064).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb

from tokenledger.errors import ConfigError, LedgerError
from tokenledger.ingest.landing import landing_files
from tokenledger.storage import lake
from tokenledger.storage.duck import literal_path, run_sql, sql_path, statement, used_params
from tokenledger.storage.lake import DayWindow
from tokenledger.storage.layout import HomeLayout

# The day views each table is computed from, as (view, schema, table) over the lake.
_INPUTS = {
    "billing": ("day_billing", "core", "billing_charges"),
    "deployments": ("day_deployments", "core", "deployments_daily"),
    "usage": ("day_usage", "core", "usage_hourly"),
    "requests": ("day_requests", "core", "gateway_requests"),
    "api_request_costs": ("day_api_request_costs", "core", "api_request_costs"),
    "cost_lines": ("day_cost_lines", "core", "cost_lines"),
    "allocation": ("day_cost_allocation", "core", "cost_allocation_daily"),
    "cost_per_mtok": ("day_cost_per_mtok", "finance", "cost_per_mtok_daily"),
    "showback": ("day_showback", "finance", "tenant_showback_daily"),
    "gpu_usage": ("day_gpu_usage", "infra", "gpu_usage_daily"),
}

# The FOCUS export's ProviderName and InvoiceIssuerName (and PublisherName of a self-hosted deployment): the serving
# platform tokenledger accounts for, which makes the deployments available to tenants
# (docs/adr/0060-focus-export.md).
FOCUS_PROVIDER = "tokenledger"


def attach(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, *inputs: str) -> None:
    """Views of the day's lake files named in `inputs` (keys of _INPUTS); a missing day is the user's to run."""
    for name in inputs:
        view, schema, table = _INPUTS[name]
        path = lake.day_file(layout.lake, schema, table, window.day)
        if not path.is_file():
            raise LedgerError(f"{schema}.{table} has no file for {window.day} ({path}): materialize that day's "
                              f"{schema}/{table} first (or run the whole day).")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM read_parquet({sql_path(path)})")


def cost_policy_in_force(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> str:
    """Create `day_cost_policy` (one row: the costs.yaml version in force on the day); returns its price_version.

    Needs the config loaded (`cfg_cost_policy`). No version in force is a ConfigError naming the day and the
    earliest valid_from.
    """
    text = "CREATE OR REPLACE TEMP TABLE day_cost_policy AS " + statement("cost_policy_day")
    con.execute(text, used_params(text, window.params()))
    row = con.execute("SELECT price_version FROM day_cost_policy").fetchone()
    if row is None:
        earliest = con.execute("SELECT min(valid_from) FROM cfg_cost_policy").fetchone()[0]
        since = f"the earliest valid_from is {earliest}" if earliest else "the file has no versions"
        raise ConfigError(f"{layout.config / 'costs.yaml'}: no cost policy version is in force on {window.day} "
                          f"({since}). Add a version with valid_from on or before {window.day} "
                          "(docs/configuration.md) and re-run the day.")
    return row[0]


def _shared_key(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE day_shared_key AS " + statement("cost_shared_key"))


def _rate_card_charges(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                       price_version: str) -> None:
    """Create `day_rate_card_charges`; stop the day when an on-premises deployment has no rate card to cost it."""
    costs_file = layout.config / "costs.yaml"
    missing = run_sql(con, "rate_cards_missing").fetchall()
    if missing:
        named = "; ".join(f"{dep} (rate_card {card!r}, deployments.yaml line {line})" for dep, card, line in missing)
        raise ConfigError(f"{costs_file}: cost policy {price_version} (in force on {window.day}) has no rate card "
                          f"for the on-premises deployment(s) {named}. Add the rate card to that version's "
                          "rate_cards (docs/configuration.md) and re-run the day.")
    tag_keys = con.execute("SELECT deployment_tag_keys FROM day_cost_policy").fetchone()[0]
    if not tag_keys and con.execute("SELECT count(*) FROM day_deployments WHERE hosting = 'on_prem' "
                                    "OR kind = 'api'").fetchone()[0]:
        raise ConfigError(f"{costs_file}: cost policy {price_version} has an empty deployment_tag_keys, so the "
                          "rate-card lines of on-premises deployments and the price-sheet lines of API deployments "
                          "cannot name their deployment. Give at least one key (docs/configuration.md) and re-run "
                          "the day.")
    text = "CREATE OR REPLACE TEMP TABLE day_rate_card_charges AS " + statement("rate_card_charges")
    deployments_file = str(layout.config / "deployments.yaml")
    con.execute(text, used_params(text, window.params(deployments_file=deployments_file)))


def build_api_request_costs(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow
                            ) -> dict[str, Any]:
    """Write core.api_request_costs for the day: every reached request of a hosted-API deployment priced at its
    tier, region and context rate, or marked unpriced with the reason (sql/cost/api_request_costs.sql)."""
    attach(con, layout, window, "deployments", "requests")
    price_version = cost_policy_in_force(con, layout, window)
    rows = _write(con, layout, window, "core", "api_request_costs")
    path = lake.day_file(layout.lake, "core", "api_request_costs", window.day)
    unpriced = con.execute(f"SELECT count(*) FILTER (WHERE price_status = 'unpriced') "
                           f"FROM read_parquet({sql_path(path)})").fetchone()[0]
    return {"rows": rows, "unpriced_requests": unpriced, "price_version": price_version}


def api_costs(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, price_version: str) -> None:
    """Create `day_api_prices` and `day_api_costs` (sql/cost/api_prices_day.sql, sql/cost/api_usage_costs.sql): each
    hosted-API deployment's standard price sheet rate, and its cost by token class over its priced requests (from
    core.api_request_costs; a request without a price is counted there, never costed at 0)."""
    attach(con, layout, window, "api_request_costs")
    con.execute("CREATE OR REPLACE TEMP TABLE day_api_prices AS " + statement("api_prices_day"))
    con.execute("CREATE OR REPLACE TEMP TABLE day_api_costs AS " + statement("api_usage_costs"))


def _api_charges(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, price_version: str) -> None:
    api_costs(con, layout, window, price_version)
    text = "CREATE OR REPLACE TEMP TABLE day_api_charges AS " + statement("api_charges")
    con.execute(text, used_params(text, window.params(deployments_file=str(layout.config / "deployments.yaml"))))


def _token_class_weights(con: duckdb.DuckDBPyConnection) -> None:
    """Create `day_token_class_weights` (sql/cost/token_class_weights_day.sql): each costed model's weight per token
    class, shared by the tenant showback and the FOCUS export so that both price a class alike. Needs
    `day_cost_per_mtok`, `day_cost_policy` and `day_api_prices`."""
    con.execute("CREATE OR REPLACE TEMP TABLE day_token_class_weights AS " + statement("token_class_weights_day"))


def _write(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow, schema: str, table: str) -> int:
    return lake.write_query(con, statement(table), lake.day_file(layout.lake, schema, table, window.day),
                            window.params())


def build_cost_lines(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write core.cost_lines for the day; returns its row count by placement and the price_version used."""
    attach(con, layout, window, "billing", "deployments", "usage")
    price_version = cost_policy_in_force(con, layout, window)
    run_sql(con, "glob_like")
    _shared_key(con)
    _rate_card_charges(con, layout, window, price_version)
    _api_charges(con, layout, window, price_version)
    rows = _write(con, layout, window, "core", "cost_lines")
    attach(con, layout, window, "cost_lines")
    placements = dict(con.execute("SELECT placement, count(*) FROM day_cost_lines GROUP BY ALL").fetchall())
    return {"rows": rows, **{f"{p}_lines": n for p, n in sorted(placements.items())},
            "price_version": price_version}


def build_cost_allocation(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow
                          ) -> dict[str, Any]:
    """Write core.cost_allocation_daily for the day (the cost lines placed, shared lines spread)."""
    attach(con, layout, window, "deployments", "usage", "cost_lines")
    price_version = cost_policy_in_force(con, layout, window)
    _shared_key(con)
    return {"rows": _write(con, layout, window, "core", "cost_allocation_daily"), "price_version": price_version}


def build_cost_per_mtok(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow) -> dict[str, Any]:
    """Write finance.cost_per_mtok_daily for the day."""
    attach(con, layout, window, "deployments", "usage", "allocation", "gpu_usage")
    price_version = cost_policy_in_force(con, layout, window)
    api_costs(con, layout, window, price_version)
    return {"rows": _write(con, layout, window, "finance", "cost_per_mtok_daily"), "price_version": price_version}


def build_tenant_showback(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow
                          ) -> dict[str, Any]:
    """Write finance.tenant_showback_daily for the day."""
    attach(con, layout, window, "usage", "cost_per_mtok", "deployments")
    price_version = cost_policy_in_force(con, layout, window)
    api_costs(con, layout, window, price_version)
    _token_class_weights(con)
    return {"rows": _write(con, layout, window, "finance", "tenant_showback_daily"),
            "price_version": price_version}


def build_focus_cost_and_usage(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow
                               ) -> dict[str, Any]:
    """Write focus.cost_and_usage_daily for the day: the showback split by deployment and token class."""
    attach(con, layout, window, "usage", "cost_per_mtok", "deployments", "showback")
    price_version = cost_policy_in_force(con, layout, window)
    api_costs(con, layout, window, price_version)
    _token_class_weights(con)
    rows = lake.write_query(con, statement("focus_cost_and_usage_daily"),
                            lake.day_file(layout.lake, "focus", "cost_and_usage_daily", window.day),
                            window.params(provider_name=FOCUS_PROVIDER))
    return {"rows": rows, "price_version": price_version}


def build_cost_reconciliation(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow
                              ) -> dict[str, Any]:
    """Write finance.cost_reconciliation_daily for the day; returns how many currencies do not balance."""
    attach(con, layout, window, "billing", "cost_lines", "allocation", "api_request_costs")
    cost_policy_in_force(con, layout, window)
    rows = _write(con, layout, window, "finance", "cost_reconciliation_daily")
    path = lake.day_file(layout.lake, "finance", "cost_reconciliation_daily", window.day)
    unbalanced = con.execute(f"SELECT count(*) FILTER (WHERE NOT balanced) FROM read_parquet({sql_path(path)})"
                             ).fetchone()[0]
    return {"rows": rows, "unbalanced_currencies": unbalanced}


PROVIDER_COST_FORMATS = {".json": "json"}
# A page is read whole as one JSON object (DuckDB's default object size): the APIs' pages are far smaller (a few
# buckets of a few results each), so a larger file is not a page and is refused before it is read.
MAX_PAGE_BYTES = 16 * 2**20
# What raw/provider_costs/ takes, said where a file is not it.
PROVIDER_PAGES = ("A file is one page of Anthropic's cost report (GET /v1/organizations/cost_report: data[] buckets "
                  "with starting_at and results[]) or of OpenAI's Costs API (GET /v1/organization/costs: object "
                  "page, data[] buckets with start_time and results[]), as JSON.")


def build_provider_cost_reconciliation(con: duckdb.DuckDBPyConnection, layout: HomeLayout, window: DayWindow,
                                       tolerance: float) -> dict[str, Any]:
    """Write finance.provider_cost_reconciliation_daily for the day: the providers' own cost exports
    (raw/provider_costs/*.json, each a saved page of OpenAI's Costs API or Anthropic's cost report) against
    tokenledger's prices, per provider, model and service tier; returns how many rows are out of tolerance, how many
    provider results are in a currency other than the cost policy's (never compared, never converted) and how many
    pages have has_more true with their next page not landed (the day incomplete). A result without a currency
    stops the day, as does a page that is not one (docs/adr/0113-provider-figures-in-one-currency-and-every-page.md)."""
    attach(con, layout, window, "deployments", "api_request_costs")
    cost_policy_in_force(con, layout, window)
    landed = landing_files(layout.raw / "provider_costs", PROVIDER_COST_FORMATS, "provider cost export")
    for f in landed:
        if f.path.stat().st_size > MAX_PAGE_BYTES:
            raise LedgerError(f"{f.path}: {f.path.stat().st_size:,} bytes, more than a page of a cost API holds "
                              f"(tokenledger reads a page of at most {MAX_PAGE_BYTES // 2**20} MiB). {PROVIDER_PAGES} "
                              "Save each page as the API returned it, one file per page, then re-run the day.")
    files = [literal_path(f.path) for f in landed]
    pages = ("SELECT filename AS file, json AS page FROM read_json_objects($files, format = 'auto', filename = true)"
             if files else "SELECT NULL::VARCHAR AS file, NULL::JSON AS page WHERE false")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE day_provider_cost_pages AS {pages}",
                    {"files": files} if files else {})
    except duckdb.Error as exc:
        raise LedgerError(f"{layout.raw / 'provider_costs'}: a provider cost export is not a JSON document ({exc}). "
                          "Save each page of the API's response as it came, one file per page, and re-run the "
                          "day.") from None
    read = {name for (name,) in con.execute("SELECT DISTINCT file FROM day_provider_cost_pages").fetchall()}
    unread = [(str(f.path), "holds no JSON document (an empty file)") for f in landed
              if str(f.path) not in read and literal_path(f.path) not in read]
    unread += run_sql(con, "provider_cost_pages_unread").fetchall()
    if unread:
        file, problem = min(unread)
        raise LedgerError(f"{file}: {problem}, so the provider's cost cannot be compared. {PROVIDER_PAGES} Save "
                          "each page as the API returned it, one file per page, then re-run the day.")
    path = lake.day_file(layout.lake, "finance", "provider_cost_reconciliation_daily", window.day)
    rows = lake.write_query(con, statement("provider_cost_reconciliation_daily"), path,
                            window.params(tolerance=tolerance))
    # incomplete_pages is the provider's, on each of its rows
    out, other_currency, incomplete = con.execute(
        "SELECT sum(out), sum(other), sum(pages) FROM (SELECT count(*) FILTER (WHERE NOT within_tolerance) AS out, "
        "sum(results_not_compared) AS other, max(incomplete_pages) AS pages "
        f"FROM read_parquet({sql_path(path)}) GROUP BY provider)").fetchone()
    return {"rows": rows, "provider_files": len(files), "out_of_tolerance": int(out or 0),
            "results_not_compared": int(other_currency or 0), "incomplete_pages": int(incomplete or 0)}


def unbalanced_rows(con: duckdb.DuckDBPyConnection, files: list[str]) -> list[str]:
    """One readable line per (day, currency) of finance.cost_reconciliation_daily that does not balance."""
    broken = con.execute(
        "SELECT day, currency, billed_effective_cost, allocated_cost, unallocated_cost, difference "
        "FROM read_parquet($f) WHERE NOT balanced ORDER BY day, currency", {"f": files}).fetchall()
    return [f"{day} {currency}: billed {_money(billed)} != allocated {_money(allocated)} + unallocated "
            f"{_money(unallocated)} (difference {_money(difference)})"
            for day, currency, billed, allocated, unallocated, difference in broken]


def _money(amount: Decimal) -> str:
    """An amount without trailing zeros: 0.01, not 0.010000000000."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "") else text
