"""The warehouse file: views over the lake (schema `core`) and over the exports (published schemas).

Holding views instead of tables keeps the warehouse out of the way of parallel runs: a step never writes it while
computing, and a view over `day=*/data.parquet` shows a new day as soon as its file is renamed into place. Views
are (re)created after publishing, with a short retry, because DuckDB lets only one process open the file to write.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from tokenledger import lake
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TableRef
from tokenledger.paths import HomeLayout


def _view_sql(ref: TableRef, root: Path) -> str:
    pattern = lake.table_glob(root, ref.schema, ref.name).replace("'", "''")
    return (f"CREATE OR REPLACE VIEW {ref.schema}.{ref.name} AS SELECT * FROM "
            f"read_parquet('{pattern}', union_by_name = true, hive_partitioning = false)")


def refresh_views(con: duckdb.DuckDBPyConnection, layout: HomeLayout) -> list[str]:
    """Create or replace a view for every table that has at least one day on disk; returns their names."""
    from tokenledger.trend import TREND

    created = []
    trend = layout.exports / TREND.schema / TREND.name / lake.DATA_FILE
    if trend.is_file():
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {TREND.schema}")
        con.execute(f"CREATE OR REPLACE VIEW {TREND.qualified} AS SELECT * FROM read_parquet("
                    f"'{str(trend).replace(chr(39), chr(39) * 2)}')")
        created.append(TREND.qualified)
    for refs, root in ((CORE_TABLES, layout.lake), (PUBLISHED_TABLES, layout.exports)):
        for ref in refs:
            if not any((root / ref.schema / ref.name).glob(f"day=*/{lake.DATA_FILE}")):
                continue
            con.execute(f"CREATE SCHEMA IF NOT EXISTS {ref.schema}")
            con.execute(_view_sql(ref, root))
            created.append(ref.qualified)
    return created
