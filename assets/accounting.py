"""Accounting: tokens, SLO attainment and goodput per model and UTC day (docs/metrics.md, sections 1-3).

core.usage_hourly is the cube later stages read; the infra tables are published (docs/tables.md). Every table
here is computed by its SQL file alone, over the day's requests judged against the SLO policy or over the cube:
each asset is built from its line in tokenledger/catalog.py (assets/tables.py), its description from its contract.
"""

from assets.tables import sql_table_assets

accounting_assets = sql_table_assets("accounting")
