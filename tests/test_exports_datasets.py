"""Every published table is one Parquet dataset that pandas, pyarrow and DuckDB read whole.

One day (test_cost's worked day: four deployments on a FOCUS bill) is run through the whole job once per module;
each test reads what it published. The day's files hold every column but `day`, which lives in the folder name
(day=2026-11-16): each reader types it as it types a partition (pandas: categories of text, pyarrow: text, DuckDB,
Polars and Spark: a date). infra.capacity_trend, rebuilt whole, is one file holding its `day`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.conftest import failure_text, make_home, materialize
from tests.test_cost import write_day
from tokenledger import lake
from tokenledger.catalog import PUBLISHED_TABLES, TableRef
from tokenledger.contracts import load_contract
from tokenledger.paths import HomeLayout
from tokenledger.publishing import csv_file, verify_day
from tokenledger.trend import TREND

DAY = dt.date(2026, 11, 16)
TABLES = [*PUBLISHED_TABLES, TREND]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_home(tmp_path_factory.mktemp("datasets") / "home")
    write_day(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOKENLEDGER_HOME", str(root))
        result = materialize(DAY.isoformat())
    assert result.success, failure_text(result)
    return root


def _folder(home: Path, ref: TableRef) -> Path:
    return home / "exports" / ref.schema / ref.name


def _rows_computed(home: Path, ref: TableRef) -> int:
    """The table's rows as the pipeline computed them: its lake file (the trend has none: its one export file)."""
    if ref == TREND:
        return pq.read_metadata(_folder(home, ref) / lake.DATA_FILE).num_rows
    return pq.read_metadata(lake.day_file(home / "lake", ref.schema, ref.name, DAY)).num_rows


def _columns(ref: TableRef) -> set[str]:
    return {c.name for c in load_contract(ref.contract_id).table().columns}


@pytest.mark.parametrize("ref", TABLES, ids=lambda r: r.qualified)
def test_each_table_is_one_dataset_read_whole_by_pandas_pyarrow_and_duckdb(home: Path, ref: TableRef) -> None:
    folder = _folder(home, ref)
    rows = _rows_computed(home, ref)
    assert rows > 0 or ref.qualified == "quality.quarantine"  # the worked day has no bad row
    # Only the dataset's files in its folder: Parquet, one per day folder (the trend: one file).
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == ([lake.DATA_FILE] if ref == TREND else [f"day={DAY}/{lake.DATA_FILE}"])

    frame = pd.read_parquet(folder)
    table = ds.dataset(folder, partitioning="hive").to_table()
    read = f"read_parquet('{folder}/**/*.parquet', hive_partitioning = true)"
    con = duckdb.connect()
    duck_types = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()}
    duck_rows, duck_days = con.execute(f"SELECT count(*), list(DISTINCT day) FROM {read}").fetchone()
    assert (len(frame), table.num_rows, duck_rows) == (rows, rows, rows)
    assert set(frame.columns) == set(table.column_names) == set(duck_types) == _columns(ref)
    if ref == TREND:  # `day` is a column of the file, a date everywhere
        assert table.schema.field("day").type == pa.date32()
        assert duck_types["day"] == "DATE"
        assert DAY in set(frame["day"]) and DAY in (duck_days or [])
        return
    # Partitioned: the files have no `day`; the folder gives it, typed as each reader types a partition.
    assert "day" not in pq.read_schema(folder / f"day={DAY}" / lake.DATA_FILE).names
    assert isinstance(frame["day"].dtype, pd.CategoricalDtype) and set(frame["day"]) <= {DAY.isoformat()}
    assert table.schema.field("day").type == pa.string()
    assert duck_types["day"] == "DATE" and set(duck_days or []) <= {DAY}
    # Typed as a date on request (pyarrow's explicit partitioning, what pandas passes on).
    dated = pd.read_parquet(folder, partitioning=ds.partitioning(pa.schema([("day", pa.date32())]), flavor="hive"))
    assert set(dated["day"]) <= {DAY} and len(dated) == rows


def test_finance_csv_lives_in_its_own_tree_beside_the_datasets(home: Path) -> None:
    exports = home / "exports"
    for ref in PUBLISHED_TABLES:
        path = csv_file(exports, ref.schema, ref.name, DAY)
        assert path.is_file() == ref.csv_export, ref.qualified
        if ref.csv_export:
            counted = duckdb.connect().execute("SELECT count(*), min(day) FROM read_csv($p)",
                                               {"p": str(path)}).fetchone()
            assert counted == (_rows_computed(home, ref), DAY), ref.qualified
    assert sorted(p.name for p in (exports / "csv" / "finance" / "cost_per_mtok_daily").iterdir()) == \
        [f"cost_per_mtok_daily_{DAY}.csv"]
    # The manifest lists every file with its hash, and what readers see matches it.
    assert verify_day(HomeLayout.of(home), DAY) == []

