"""The tables tokenledger keeps, by schema: what is published (spec/published.md) and what stays internal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableRef:
    schema: str
    name: str
    csv_export: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


# Internal tables: the typed, reconciled inputs. Queried through the warehouse's `core` views.
CORE_TABLES = (
    TableRef("core", "deployments_daily"),
    TableRef("core", "gateway_requests"),
    TableRef("core", "billing_charges"),
)

# Published tables: copied to exports/ only after the day's blocking checks pass; finance also as CSV.
PUBLISHED_TABLES = (
    TableRef("quality", "ingest_reconciliation_daily"),
    TableRef("quality", "quarantine"),
)
