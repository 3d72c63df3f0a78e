"""Every published table is one Parquet dataset that pandas, pyarrow, DuckDB, Polars and Spark read whole, and a
copied home's warehouse reads the copy and nothing else.

One day (test_cost's worked day: four deployments on a FOCUS bill) is run through the whole job once per module;
each test reads what it published. The day's files hold every column but `day`, which lives in the folder name
(day=2026-11-16): each reader types it as it types a partition (pandas: categories of text, pyarrow: text, DuckDB,
Polars and Spark: a date). infra.capacity_trend, rebuilt whole, is one file holding its `day`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.conftest import failure_text, make_home, materialize
from tests.test_cost import write_day
from tokenledger.capacity.trend import rebuild_trend
from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES, TREND, TableRef
from tokenledger.contracts import load_contract
from tokenledger.expectations import CRITICAL
from tokenledger.publish.versions import (
    DATASET_LAYOUT,
    Staging,
    csv_file,
    current_version,
    manifest_name,
    publish_files,
    verify_day,
)
from tokenledger.publish.warehouse import connect, refresh_views
from tokenledger.storage import lake
from tokenledger.storage.duck import compute_connection
from tokenledger.storage.layout import HomeLayout

DAY = dt.date(2026, 11, 16)
TRACES = "infra.cache_whatif_traces"  # published whole: a trace has no day
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
    """The contract's columns, and `day`, which a table without it (the FOCUS export) gains from its folders."""
    return {c.name for c in load_contract(ref.contract_id).table().columns} | {"day"}


@pytest.mark.parametrize("ref", TABLES, ids=lambda r: r.qualified)
def test_each_table_is_one_dataset_read_whole_by_pandas_pyarrow_and_duckdb(home: Path, ref: TableRef) -> None:
    folder = _folder(home, ref)
    rows = _rows_computed(home, ref)
    # The worked day has no bad row, no prefix block hashes to simulate a cache with, no provider cost export and no
    # load test (whose steps the sweep lists).
    assert rows > 0 or ref.qualified in {"quality.quarantine", "infra.cache_whatif_daily",
                                         "finance.provider_cost_reconciliation_daily", "infra.loadtest_sweep_daily"}
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


def test_polars_reads_each_dataset_with_its_day(home: Path) -> None:
    pl = pytest.importorskip("polars")
    for ref in TABLES:
        folder = _folder(home, ref)
        rows = _rows_computed(home, ref)
        # A folder is read as a hive dataset; a glob is only when asked (Polars' rule), else `day` is left out.
        for frame in (pl.scan_parquet(folder).collect(),
                      pl.scan_parquet(f"{folder}/**/*.parquet", hive_partitioning=True).collect()):
            assert (frame.height, frame.schema["day"]) == (rows, pl.Date), ref.qualified
            assert set(frame.columns) == _columns(ref)
        assert pl.scan_parquet(f"{folder}/**/*.parquet").collect().height == rows


@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs a Java runtime (java on PATH)")
def test_spark_reads_each_dataset_with_its_day(home: Path) -> None:
    """Runs where pyspark is installed, which is not the dev environment: beside great_expectations it exits
    pytest-xdist workers (pyproject.toml). `pip install pyspark==4.3.0`, then run this file with `-n 0`."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DateType

    spark = (SparkSession.builder.master("local[1]").appName("tokenledger-exports")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        # The two tables the issue found unreadable, and the one not partitioned (a Spark job costs seconds).
        for ref in (TableRef("finance", "cost_per_mtok_daily"), TableRef("infra", "capacity_daily"), TREND):
            frame = spark.read.parquet(str(_folder(home, ref)))
            assert isinstance(frame.schema["day"].dataType, DateType) and set(frame.columns) == _columns(ref)
            per_day = {r["day"]: r["count"] for r in frame.groupBy("day").count().collect()}
            assert sum(per_day.values()) == _rows_computed(home, ref) and set(per_day) <= {DAY}, ref.qualified
    finally:
        spark.stop()


# --- the warehouse of a copied home ----------------------------------------------------------------------------

def _files_rows(pattern_root: Path, pattern: str) -> int:
    return sum(pq.read_metadata(p).num_rows for p in pattern_root.glob(pattern))


def _expected(home: Path) -> dict[str, int]:
    """Rows each view must show, counted from the home's files by pyarrow (no DuckDB path resolution involved)."""
    current = home / ".published" / "current"
    expected = {ref.qualified: _files_rows(current / "lake" / "core" / ref.name, f"day=*/{lake.DATA_FILE}")
                for ref in CORE_TABLES}
    expected |= {ref.qualified: _files_rows(current / "exports" / ref.schema / ref.name, f"day=*/{lake.DATA_FILE}")
                 for ref in PUBLISHED_TABLES}
    expected[TREND.qualified] = _files_rows(current / "exports" / "infra" / "capacity_trend", "*.parquet")
    expected[TRACES] = _files_rows(current / "exports" / "infra" / "cache_whatif_traces", "*.parquet")
    expected["quality.quarantine_pending"] = _files_rows(home / "lake" / "quality" / "quarantine",
                                                         f"day=*/{lake.DATA_FILE}")
    return expected


def _views(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, list]]:
    names = [v for (v,) in con.execute("SELECT schema_name || '.' || view_name FROM duckdb_views() "
                                       "WHERE NOT internal ORDER BY 1").fetchall()]
    return {v: con.execute(f"SELECT count(*), {'NULL' if v == TRACES else 'list(DISTINCT day ORDER BY day)'} "
                           f"FROM {v}").fetchone() for v in names}


def _other_home(home: Path, to: Path) -> Path:
    """Another home with the same files (the case a relative path could silently read): a copy with its own id."""
    subprocess.run(["cp", "-a", str(home), str(to)], check=True)
    for marker in (to / ".published").glob("home-*"):
        marker.rename(marker.with_name("home-another"))
    return to


def test_a_copied_home_reads_itself_through_tokenledger_and_plain_duckdb(home: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A path DuckDB would misread: a ',' splits file_search_path, key=value folders look like hive partitions
    # (and DuckDB takes the first day=); the copy must still show 2026-11-16 and no extra column.
    original = tmp_path / "original" / "home"
    original.parent.mkdir()
    subprocess.run(["cp", "-a", str(home), str(original)], check=True)
    refresh_views(HomeLayout.of(original))  # the trend's view too (the run published the trend after the views)
    copy = tmp_path / "day=2020-01-01" / "env=prod,b" / "home"
    copy.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    shutil.rmtree(original)
    layout = HomeLayout.of(copy)
    assert not refresh_views(layout).refreshed  # nothing in the views names the original
    expected = _expected(copy)
    assert expected["core.gateway_requests"] > 0
    # the trend, the traces, the pending quarantine
    assert len(expected) == len(CORE_TABLES) + len(PUBLISHED_TABLES) + 3

    other = _other_home(home, tmp_path / "other")
    monkeypatch.chdir(other)  # tokenledger reads its home wherever it runs, even from inside another home
    with connect(layout) as con:
        through_tokenledger = _views(con)
        published = [ref for ref in PUBLISHED_TABLES if expected[ref.qualified]]
        for ref in published:  # `day` first and a date, nothing from the path's other folders
            described = con.execute(f"DESCRIBE {ref.qualified}").fetchall()
            assert described[0][:2] == ("day", "DATE") and {c[0] for c in described} == _columns(ref)
    monkeypatch.chdir(copy)  # anyone else opens the warehouse from its home folder
    with duckdb.connect(str(layout.warehouse), read_only=True) as con:
        plain = _views(con)
    assert {v: n for v, (n, _) in through_tokenledger.items()} == {v: n for v, (n, _) in plain.items()} == expected
    assert all(days in (None, [DAY]) for _, days in [*through_tokenledger.values(), *plain.values()])

    # Opened from another home's folder, or from a folder that is no home, a view fails instead of reading it.
    for folder, says in ((other, "not that home"), (tmp_path, "No files found")):
        monkeypatch.chdir(folder)
        with duckdb.connect(str(layout.warehouse), read_only=True) as con:
            for view in expected:
                with pytest.raises(duckdb.Error, match=says):
                    con.execute(f"SELECT count(*) FROM {view}").fetchone()

    # The trend rebuilt in the copy dates its rows from the day folders' own names, not the ancestors'.
    with compute_connection(tmp_path / "spill") as con:
        outcome = rebuild_trend(con, layout)
    assert (outcome.rows, outcome.days, outcome.validation.failed(CRITICAL)) == (expected[TREND.qualified], 1, [])
    trend = pq.read_table(copy / "exports" / "infra" / "capacity_trend" / lake.DATA_FILE)
    assert set(trend.column("day").to_pylist()) == {DAY} and trend.num_rows == expected[TREND.qualified]


def test_views_written_with_absolute_paths_are_rewritten_when_tokenledger_opens_the_warehouse(
        home: Path, tmp_path: Path) -> None:
    copy = tmp_path / "home"
    subprocess.run(["cp", "-a", str(home), str(copy)], check=True)
    layout = HomeLayout.of(copy)
    # What an earlier tokenledger left: a view reading the original home by its absolute path.
    with duckdb.connect(str(layout.warehouse)) as con:
        con.execute(f"CREATE OR REPLACE VIEW infra.slo_daily AS SELECT * FROM read_parquet("
                    f"'{home}/exports/infra/slo_daily/day=*/data.parquet', hive_partitioning = false)")
    (copy / "warehouse.duckdb.views").write_text("digest of the earlier statements\n")
    with connect(layout) as con:
        definitions = [sql for (sql,) in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()]
        assert definitions and not any(str(home) in sql for sql in definitions)
        assert con.execute("SELECT count(*) FROM infra.slo_daily").fetchone()[0] == _expected(copy)["infra.slo_daily"]


def test_days_published_before_datasets_are_restaged_by_the_next_publication(home: Path, tmp_path: Path) -> None:
    copy = tmp_path / "home"
    subprocess.run(["cp", "-a", str(home), str(copy)], check=True)
    layout = HomeLayout.of(copy)
    exports = current_version(layout) / "exports"
    # The day as an earlier tokenledger published it: the lake files (`day` a column), finance CSV beside them.
    manifest = json.loads((exports / manifest_name(DAY)).read_text())
    earlier = []
    for entry in manifest["files"]:
        schema, table = entry["table"].split(".")
        path = exports / entry["path"]
        if path.suffix == ".csv":
            moved = lake.day_dir(Path(), schema, table, DAY) / "data.csv"
            path.rename(exports / moved)
            earlier.append({**entry, "path": str(moved)})
        else:
            path.unlink()  # a hard link of the lake's file in this copy too: replaced, never written through
            shutil.copyfile(lake.day_file(copy / "lake", schema, table, DAY), path)
            earlier.append({**entry, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    del manifest["layout"]
    (exports / manifest_name(DAY)).write_text(json.dumps({**manifest, "files": earlier}))
    assert verify_day(layout, DAY) == []
    with pytest.raises(Exception, match="data.csv|incompatible types"):
        pd.read_parquet(_folder(copy, TableRef("finance", "cost_reconciliation_daily")))

    publish_files(layout, Staging(layout))  # any later publication, here one with nothing of its own

    assert verify_day(layout, DAY) == []
    assert json.loads((copy / "exports" / manifest_name(DAY)).read_text())["layout"] == DATASET_LAYOUT
    for ref in PUBLISHED_TABLES:
        folder = _folder(copy, ref)
        assert [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()] == \
               [f"day={DAY}/{lake.DATA_FILE}"], ref.qualified
        assert len(pd.read_parquet(folder)) == _rows_computed(copy, ref)
        assert csv_file(copy / "exports", ref.schema, ref.name, DAY).is_file() == ref.csv_export
