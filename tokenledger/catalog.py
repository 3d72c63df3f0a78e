"""The tables tokenledger keeps, by schema: what is published (spec/published.md) and what stays internal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableRef:
    """A table kept per day; its asset key is [schema, name] and its contract data_contracts/<contract>.odcs.yaml."""

    schema: str
    name: str
    csv_export: bool = False
    contract: str | None = None
    contract_table: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def contract_id(self) -> str:
        """The contract that types and guards the table: its own, or for a core table the input's it was read by."""
        return self.contract or f"{self.schema}_{self.name}"


# Internal tables: the typed, reconciled inputs. Queried through the warehouse's `core` views.
CORE_TABLES = (
    TableRef("core", "deployments_daily", contract="deployments"),
    TableRef("core", "gateway_requests", contract="gateway_request"),
    TableRef("core", "billing_charges", contract="focus_billing"),
    TableRef("core", "usage_hourly"),
    TableRef("core", "cost_lines"),
    TableRef("core", "cost_allocation_daily"),
    TableRef("core", "loadtest_steps"),
    TableRef("core", "capacity_windows"),
)

# Published tables: copied to exports/ only after the day's blocking checks pass; finance also as CSV. The focus
# schema holds FinOps FOCUS datasets, column names and all (data_contracts/focus_*.odcs.yaml).
PUBLISHED_TABLES = (
    TableRef("quality", "ingest_reconciliation_daily"),
    TableRef("quality", "quarantine"),
    TableRef("infra", "token_split_daily"),
    TableRef("infra", "token_split_hourly"),
    TableRef("infra", "slo_daily"),
    TableRef("infra", "slo_hourly"),
    TableRef("infra", "capacity_daily"),
    TableRef("infra", "goodput_hourly"),
    TableRef("infra", "load_hourly"),
    TableRef("infra", "capacity_plan_daily"),
    TableRef("infra", "cache_whatif_daily"),
    TableRef("finance", "cost_per_mtok_daily", csv_export=True),
    TableRef("finance", "tenant_showback_daily", csv_export=True),
    TableRef("finance", "cost_reconciliation_daily", csv_export=True),
    TableRef("focus", "cost_and_usage_daily"),
)
