"""The configuration files of a home (three required, whatif.yaml optional), read into typed models and checked
against their contracts.

- tokenledger.config.source reads a file's YAML, remembering the line of every mapping and key;
- tokenledger.config.models are the files as pydantic models: which keys each mapping takes and how entries nest
  (a broken shape stops the run with the file, the line, the key and a did-you-mean: tokenledger.config.messages);
- tokenledger.config.flatten (and .prices, for the price sheets) flattens each file's model into the tables its
  contract describes (`deployments`; `slo_policy`, `slo_isl_bucket`, `cost_policy`, `cost_category_rule`,
  `list_price`, `rate_card`, `api_price`; `whatif_scenario`, `whatif_model`, `whatif_trace`, `whatif_sampling`);
- here, each table is typed and checked by the same contract-derived SQL that guards the data (types, ranges,
  allowed values, and the effective-dating rules across rows), and loaded into the step's DuckDB as
  `cfg_<table>`. Any broken rule is fatal: the error names the file, the line, the field and the rule.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import duckdb
import pyarrow as pa

from tokenledger.config.flatten import (
    DEFAULT_SCENARIO,
    WHATIF_FILE,
    flatten_costs,
    flatten_deployments,
    flatten_slo,
    flatten_whatif,
)
from tokenledger.config.messages import _check_keys, _require_list, _require_mapping
from tokenledger.config.models import DEFAULT_BUDGET_ACCESSES, DEFAULT_MODEL
from tokenledger.config.prices import LITELLM_PRICE_KEYS, MAX_PRICE_MAP_BYTES
from tokenledger.config.source import MAX_CONFIG_BYTES, MAX_EXPANDED_NODES, _line, _Mapping, _Rows, _text, read_yaml
from tokenledger.contracts import Table, load_contract, typed_select, violation_reasons
from tokenledger.errors import ConfigError
from tokenledger.storage.duck import register_arrow
from tokenledger.storage.layout import HomeLayout

__all__ = [
    "CONFIG_FILES", "DEFAULT_BUDGET_ACCESSES", "DEFAULT_MODEL", "DEFAULT_SCENARIO", "LITELLM_PRICE_KEYS",
    "MAX_CONFIG_BYTES", "MAX_EXPANDED_NODES", "MAX_PRICE_MAP_BYTES", "OPTIONAL_CONFIG_FILES", "WHATIF_FILE",
    "ConfigError", "_Mapping",
    "_Rows", "_check_keys", "_line", "_load_rows", "_require_list", "_require_mapping", "_text", "flatten_costs",
    "flatten_deployments", "flatten_slo", "flatten_whatif", "load_config", "read_yaml",
]


def _load_rows(con: duckdb.DuckDBPyConnection, rows: _Rows, table: Table) -> None:
    """Type `rows` by the contract into `cfg_<table>`; raise naming file, line and rule on any violation."""
    columns = {f"{c}__text": pa.array([r.get(c) for r in rows.rows], pa.string()) for c in table.column_names}
    columns["_line"] = pa.array(rows.lines, pa.int64())
    columns["_row"] = pa.array(range(len(rows.rows)), pa.int64())
    register_arrow(con, "_config_text", pa.table(columns))
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _config_typed AS "
                    f"SELECT _line, _row, * EXCLUDE (_line, _row), {', '.join(typed_select(table))} "
                    "FROM _config_text")
        problems = con.execute(f"SELECT _row, {violation_reasons(table)} AS reason FROM _config_typed "
                               "WHERE reason IS NOT NULL ORDER BY _line").fetchall()
    finally:
        con.unregister("_config_text")
    if problems:
        details = "\n".join(
            f"  {rows.path} line {rows.field_line(row, part.split(':')[0])}: {part}"
            for row, reason in problems[:20] for part in reason.split("; "))
        raise ConfigError(f"{rows.path} breaks the {table.name} contract "
                          f"(data_contracts/*.odcs.yaml):\n{details}\nFix these entries and re-run.")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table.name} AS "
                f"SELECT _line, {', '.join(table.column_names)} FROM _config_typed")
    for rule in table.set_rules:
        broken = con.execute(rule.query).fetchone()[0]
        if broken:
            raise ConfigError(f"{rows.path}: {rule.name}: {rule.description} ({broken} case(s)). "
                              "Fix the file and re-run.")
    con.execute(f"CREATE OR REPLACE TEMP TABLE cfg_{table.name} AS SELECT * FROM {table.name}")
    con.execute(f"DROP TABLE {table.name}")
    con.execute("DROP TABLE _config_typed")


CONFIG_FILES = ("deployments.yaml", "slo.yaml", "costs.yaml")
OPTIONAL_CONFIG_FILES = (WHATIF_FILE,)
# Checked config tables by the digest of the files' bytes: every step of a run loads the same files, and checking
# them against their contracts costs more than the step's own work on a small day. The last CHECKED_KEPT versions
# are kept (a few kB each), so a process that goes back to an earlier version, as the tests' homes do, does not
# check it again: a digest names the same bytes, so its tables stay right.
CHECKED_KEPT = 8
_checked: OrderedDict[str, dict[str, pa.Table]] = OrderedDict()


def load_config(con: duckdb.DuckDBPyConnection, layout: HomeLayout) -> None:
    """Read, check and load the three config files and the optional whatif.yaml into `cfg_*` temp tables (or views
    of the same rows) of `con`.

    The checked tables are kept per process under the digest of the files' contents, so a file changed between
    two steps is read and checked again, and an unchanged one is not checked twice."""
    layout.check()
    # Every regular file of the config folder: the three files and a price map costs.yaml may name.
    digest = hashlib.sha256(b"".join(
        name.encode() + hashlib.sha256((layout.config / name).read_bytes()).digest()
        for name in sorted({*CONFIG_FILES, *(p.name for p in layout.config.iterdir() if p.is_file() and (
            p.suffix == ".json" or p.name in OPTIONAL_CONFIG_FILES))}))).hexdigest()
    tables = _checked.get(digest)
    if tables is None:
        _drop_shared_tables(con)  # an earlier digest's, which a table this one lacks would otherwise read
        config_tables = load_contract("config")
        deployments = load_contract("deployments").table()
        for rows in flatten_deployments(layout.config / "deployments.yaml"):
            _load_rows(con, rows, deployments)
        for rows in flatten_slo(layout.config / "slo.yaml") + flatten_costs(layout.config / "costs.yaml"):
            _load_rows(con, rows, config_tables.table(rows.table))
        whatif = load_contract("whatif")
        for rows in flatten_whatif(layout.config / WHATIF_FILE):
            _load_rows(con, rows, whatif.table(rows.table))
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary "
                                           "AND table_name LIKE 'cfg\\_%' ESCAPE '\\'").fetchall()]
        _checked[digest] = {name: con.sql(f"SELECT * FROM {name}").to_arrow_table() for name in names}
        while len(_checked) > CHECKED_KEPT:
            _checked.popitem(last=False)
        return
    _checked.move_to_end(digest)
    # A connection that loaded the config before holds them as temp tables, which would hide the shared ones.
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name LIKE "
                               "'cfg\\_%' ESCAPE '\\'").fetchall():
        if name in tables:
            con.execute(f"DROP TABLE {name}")
    if _shared_tables_hold(con, digest):
        return
    if _in_memory(con):
        _share_tables(con, digest, tables)
        return
    # A database on disk gets nothing written into it: the connection's own views of the checked tables.
    for name, checked in tables.items():
        register_arrow(con, name, checked)


# In an in-memory database (the process's compute database: tokenledger.storage.duck) the checked tables are made once
# as tables of its main schema, which every connection to it reads, with this marker naming the files' digest: each
# step's own views of 11 tables cost 40 ms of a small day's step, a quarter second of a run.
_SHARED_DIGEST = "config__digest"


def _in_memory(con: duckdb.DuckDBPyConnection) -> bool:
    return con.execute("SELECT path IS NULL FROM duckdb_databases() WHERE database_name = current_database()"
                       ).fetchone()[0]


def _shared_tables_hold(con: duckdb.DuckDBPyConnection, digest: str) -> bool:
    exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                         "AND database_name = current_database() AND table_name = $t", {"t": _SHARED_DIGEST}
                         ).fetchone()[0]
    return bool(exists) and con.execute(f"SELECT any_value(digest) = $d FROM main.{_SHARED_DIGEST}",
                                        {"d": digest}).fetchone()[0] is True


def _drop_shared_tables(con: duckdb.DuckDBPyConnection) -> None:
    if not _in_memory(con):
        return
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND schema_name = 'main' "
                               "AND database_name = current_database() AND (table_name LIKE 'cfg\\_%' ESCAPE '\\' "
                               "OR table_name = $t)", {"t": _SHARED_DIGEST}).fetchall():
        con.execute(f"DROP TABLE main.{name}")


def _share_tables(con: duckdb.DuckDBPyConnection, digest: str, tables: dict[str, pa.Table]) -> None:
    _drop_shared_tables(con)
    for name, checked in tables.items():
        register_arrow(con, "_config_checked", checked)
        try:
            con.execute(f"CREATE TABLE main.{name} AS SELECT * FROM _config_checked")
        finally:
            con.unregister("_config_checked")
    con.execute(f"CREATE TABLE main.{_SHARED_DIGEST} AS SELECT $d AS digest", {"d": digest})
