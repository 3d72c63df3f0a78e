"""Blocking checks between computing a day and publishing it: a failing check stops that run's publishing.

Each check reads the day files its asset just wrote (for a ranged run, every day of the range) and fails with a
message naming the table, the day, the rule and examples of the offending rows.
"""

import dagster as dg
import duckdb

from assets.quality import ingest_reconciliation_daily
from pipelines.partitions import daily_partitions, days_of
from pipelines.resources import LedgerResource
from tokenledger import lake


def _day_files(ledger: LedgerResource, schema: str, table: str, context: dg.AssetCheckExecutionContext) -> list[str]:
    return [str(lake.day_file(ledger.layout.lake, schema, table, day)) for day in days_of(context)]


@dg.asset_check(asset=ingest_reconciliation_daily, blocking=True, partitions_def=daily_partitions,
                description="Every day and source: rows read = rows accepted + rows quarantined + duplicates merged.")
def ingest_reconciliation_balanced(context: dg.AssetCheckExecutionContext, ledger: LedgerResource
                                   ) -> dg.AssetCheckResult:
    files = _day_files(ledger, "quality", "ingest_reconciliation_daily", context)
    broken = duckdb.connect().execute(
        "SELECT day, source, rows_read, rows_accepted, rows_quarantined, duplicates_merged FROM read_parquet($f) "
        "WHERE NOT balanced ORDER BY day, source", {"f": files}).fetchall()
    examples = [f"{d} {s}: read {r} != accepted {a} + quarantined {q} + merged {m}" for d, s, r, a, q, m in broken]
    return dg.AssetCheckResult(
        passed=not broken,
        description=("quality.ingest_reconciliation_daily does not balance: " + "; ".join(examples[:5])
                     if broken else f"{len(files)} day(s) balanced for every source"),
        metadata={"unbalanced_rows": len(broken)},
    )
