"""Cost: the bill allocated to deployments, cost per 1M tokens, tenant showback and reconciliation (metrics.md, 4).

core.cost_lines and core.cost_allocation_daily are internal; the finance tables are published (docs/tables.md)
once the blocking check `cost_reconciliation_balanced` (assets/checks.py, run in the reconciliation's step) has
passed for the day, and so is the showback as a FinOps FOCUS dataset, focus.cost_and_usage_daily. The logic is in
tokenledger/cost/day.py and the SQL file named after each table.
"""

import dagster as dg
from tokenledger.assets.daily import for_each_day
from tokenledger.assets.tables import table_asset
from tokenledger.pipelines.resources import LedgerResource

from tokenledger.cost.day import (
    build_api_request_costs,
    build_cost_allocation,
    build_cost_lines,
    build_cost_per_mtok,
    build_cost_reconciliation,
    build_focus_cost_and_usage,
    build_provider_cost_reconciliation,
    build_tenant_showback,
)


@table_asset("core.api_request_costs")
def api_request_costs(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every request that reached a hosted-API deployment, priced at the rate of its service tier, inference region
    and context tier, or marked unpriced with the reason (cost NULL, never 0).

    Grain: day x request_id. Source: core.gateway_requests, core.deployments_daily, config/costs.yaml.
    Definition: docs/metrics.md, 4; contract data_contracts/core/core_api_request_costs.odcs.yaml.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_api_request_costs(con, ledger.layout, window),
                        needs_config=True)


@table_asset("core.cost_lines")
def cost_lines(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Every cost line of the day, placed on a deployment ('tagged', 'resource_id'), 'shared' or 'unallocated',
    with its category, currency and the price_version in force.

    Grain: day x cost line (a FOCUS row of core.billing_charges, or the rate-card row of an on-premises deployment
    version). Source: core.billing_charges, core.deployments_daily, config/costs.yaml. Definition:
    docs/metrics.md, 4; contract data_contracts/core/core_cost_lines.odcs.yaml.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_cost_lines(con, ledger.layout, window),
                        needs_config=True)


@table_asset("core.cost_allocation_daily")
def cost_allocation_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The day's cost lines summed where they land: on a deployment, spread as shared by the policy's key, or
    unallocated.

    Grain: day x currency x source x placement x deployment_id x category. Source: core.cost_lines. Definition:
    docs/metrics.md, 4; contract data_contracts/core/core_cost_allocation_daily.odcs.yaml.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_cost_allocation(con, ledger.layout, window),
                        needs_config=True)


@table_asset("finance.cost_per_mtok_daily")
def cost_per_mtok_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Cost per deployment by category, and per 1M tokens: delivered, under SLO, over all tokens, per token class.

    Grain: day x model x deployment_id x currency (deployments allocated cost). Source: core.cost_allocation_daily,
    core.usage_hourly. Definition: docs/metrics.md, 4; docs/tables.md, finance.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_cost_per_mtok(con, ledger.layout, window),
                        needs_config=True)


@table_asset("finance.tenant_showback_daily")
def tenant_showback_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """Each tenant's share of a model's daily cost by weighted tokens; a model's tenants add up to its cost.

    Grain: day x tenant_id x model x currency. Source: core.usage_hourly, finance.cost_per_mtok_daily.
    Definition: docs/metrics.md, 4; docs/tables.md, finance.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_tenant_showback(con, ledger.layout, window),
                        needs_config=True)


@table_asset("focus.cost_and_usage_daily")
def focus_cost_and_usage_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The tenant showback as a FinOps FOCUS 1.2 cost and usage dataset, for FinOps tools to take in like a bill.

    Grain: day x tenant (BillingAccountId) x deployment (ResourceId) x model and token class (SkuId) x currency;
    Usage rows only, costs in EffectiveCost = BilledCost, tokens in ConsumedQuantity. A tenant's rows of a model add
    up exactly to its finance.tenant_showback_daily cost. Source: finance.tenant_showback_daily, core.usage_hourly.
    Definition: data_contracts/focus/focus_cost_and_usage_daily.odcs.yaml; docs/adr/0060-focus-export.md.
    """
    return for_each_day(context, ledger,
                        lambda con, window, _: build_focus_cost_and_usage(con, ledger.layout, window),
                        needs_config=True)


@table_asset("finance.cost_reconciliation_daily")
def cost_reconciliation_daily(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    """The bill against where its cost went: billed EffectiveCost = allocated + unallocated, per currency.

    Grain: day x currency. Source: core.billing_charges, core.cost_lines, core.cost_allocation_daily.
    Definition: docs/metrics.md, 4 (reconciliation); docs/tables.md, finance.
    """
    return for_each_day(context, ledger,
                        lambda con, window, _: build_cost_reconciliation(con, ledger.layout, window),
                        needs_config=True)



@table_asset("finance.provider_cost_reconciliation_daily")
def provider_cost_reconciliation_daily(context: dg.AssetExecutionContext, ledger: LedgerResource
                                       ) -> dg.MaterializeResult:
    """What each hosted-API provider's own cost export says the day cost, beside tokenledger's price of the same
    requests, per provider, model and service tier, and the difference (flagged beyond provider_cost_tolerance).

    Grain: day x provider x model x service_tier x currency. Source: raw/provider_costs/ (OpenAI's Costs API,
    Anthropic's cost report), core.api_request_costs. Definition: docs/metrics.md, 4; docs/tables.md, finance.
    """
    return for_each_day(context, ledger, lambda con, window, _: build_provider_cost_reconciliation(
        con, ledger.layout, window, ledger.provider_cost_tolerance), needs_config=True)
