"""The Dagster wiring: loadable, every asset daily in UTC with a single-run backfill policy and a docstring."""

from __future__ import annotations

import dagster as dg
from tokenledger.pipelines.definitions import defs


def test_definitions_load_and_every_asset_is_a_documented_utc_daily_partition() -> None:
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"core/deployments_daily", "core/gateway_requests", "core/billing_charges", "quality/quarantine",
            "quality/ingest_reconciliation_daily", "publish/exports", "infra/capacity_trend"} <= keys
    for key in graph.get_all_asset_keys():
        assets_def = defs.resolve_assets_def(key)
        partitions = assets_def.partitions_def
        # one table over all days (or over traces, which have none), rebuilt in every run
        if key.to_user_string() in ("infra/capacity_trend", "infra/cache_whatif_traces"):
            assert partitions is None
        else:
            assert isinstance(partitions, dg.DailyPartitionsDefinition), key
            assert partitions.timezone == "UTC", key
        # `dagster asset materialize --partition-range` needs a single-run policy on every selected asset.
        assert assets_def.backfill_policy == dg.BackfillPolicy.single_run(), key
        assert (assets_def.descriptions_by_key.get(key) or "").strip(), f"{key} has no docstring"


def test_the_daily_job_covers_every_asset_and_check() -> None:
    job = defs.resolve_job_def("daily_pipeline")
    graph = defs.resolve_asset_graph()
    assert job.asset_layer.executable_asset_keys == set(graph.get_all_asset_keys())
    check_names = {k.name for k in graph.asset_check_keys}
    assert "ingest_reconciliation_balanced" in check_names


def test_partitions_start_at_the_first_landed_day(tmp_path) -> None:
    from datetime import date

    from tokenledger.ingest.landing import first_landing_day

    raw = tmp_path / "raw"
    for folder in ("gateway/dt=2026-11-18", "litellm/dt=2026-11-14", "gateway/dt=not-a-day", "billing/dt=2020-01-01",
                   "loadtest/dt=2020-01-01"):
        (raw / folder).mkdir(parents=True)
    # billing and load tests do not start the partitions: they are not days of requests
    assert first_landing_day(raw) == date(2026, 11, 14)
    assert first_landing_day(tmp_path / "missing") is None


def test_a_multi_day_run_sums_counts_and_reports_gauges_per_day() -> None:
    from datetime import date

    from tokenledger.assets.daily import _summary

    meta = _summary({date(2026, 11, 16): {"rows": 10, "runs_measured": 2, "gpus_needed": 12.5},
                     date(2026, 11, 17): {"rows": 5, "runs_measured": 2, "gpus_needed": 13.0}})
    assert (meta["rows"], meta["days"]) == (15, 2)
    # Dagster records the range's materialization on each of its days: 15 must not read as each day's row count
    assert "dagster/row_count" not in meta
    assert _summary({date(2026, 11, 16): {"rows": 10}})["dagster/row_count"] == 10
    assert "runs_measured" not in meta and "gpus_needed" not in meta  # never 4 runs or 25.5 GPUs
    assert meta["per_day"].data["2026-11-17"] == {"rows": 5, "runs_measured": 2, "gpus_needed": 13.0}


def test_a_day_table_shows_its_contract_schema_and_file_in_the_catalog(home) -> None:
    from datetime import date

    from tokenledger.assets.daily import catalog_metadata
    from tokenledger.pipelines.resources import LedgerResource

    meta = catalog_metadata(LedgerResource(home=str(home)), dg.AssetKey(["finance", "cost_per_mtok_daily"]),
                            [date(2026, 11, 16)])
    columns = {c.name: c for c in meta["dagster/column_schema"].columns}
    assert columns["cost_per_mtok_goodput"].type == "DOUBLE"
    assert columns["cost_per_mtok_goodput"].description.startswith("cost_total / compliant_output_tokens * 1e6")
    assert meta["path"].path == str(home / "lake" / "finance" / "cost_per_mtok_daily" / "day=2026-11-16"
                                    / "data.parquet")
    # a range's materialization is recorded on each of its days: its path is the table's folder, not one day's
    ranged = catalog_metadata(LedgerResource(home=str(home)), dg.AssetKey(["finance", "cost_per_mtok_daily"]),
                              [date(2026, 11, 16), date(2026, 11, 17)])
    assert ranged["path"].path == str(home / "lake" / "finance" / "cost_per_mtok_daily")


def test_each_day_table_is_declared_once_and_the_registry_makes_its_asset_checks_and_publication() -> None:
    """tokenledger/catalog.py's line of a table is the only place its stage, lineage and publication are said:
    the graph's day tables are exactly the registry's, each with the registry's group, deps (and those of its
    checks), contract check and catalog metadata, and publish/exports reads exactly the published ones."""
    from pathlib import Path

    from tokenledger.catalog import TABLES
    from tokenledger.contracts import load_contract

    root = Path(__file__).parents[1]
    graph = defs.resolve_asset_graph()
    day_tables = {k.to_user_string() for k in graph.get_all_asset_keys()
                  if k.path[0] in ("core", "quality", "infra", "finance", "focus")} - {
                      "infra/capacity_trend", "infra/cache_whatif_traces"}  # whole tables, not day tables
    assert day_tables == {f"{t.schema}/{t.name}" for t in TABLES}
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    for ref in TABLES:
        key = dg.AssetKey(ref.key_path)
        node = graph.get(key)
        assert node.group_name == ref.stage, ref
        # Its step reads what the registry says, and what its checks (run in that step) read besides it.
        checks_read = {d.asset_key for spec in defs.resolve_assets_def(key).check_specs for d in spec.additional_deps}
        assert node.parent_keys == {dg.AssetKey(r.split(".")) for r in ref.reads} | checks_read, ref
        assert (f"{ref.schema}/{ref.name}", "contract") in checks, ref
        assert (root / ref.sql_file).is_file() and (root / ref.contract_file).is_file(), ref
        meta = defs.resolve_assets_def(key).metadata_by_key[key]
        contract_columns = [c.name for c in load_contract(ref.contract_id).table(ref.contract_table).columns]
        assert [c.name for c in meta["dagster/column_schema"].columns] == contract_columns, ref
        assert (meta["grain"], meta["contract"]) == (ref.grain, ref.contract_file), ref
    # Publication is the day's last step: every published table, the review and the traces table published with
    # them are upstream of it, so a step failing anywhere leaves what readers see as it was.
    published = {f"{t.schema}/{t.name}" for t in TABLES if t.published}
    assert {p.to_user_string() for p in graph.get(dg.AssetKey(["publish", "exports"])).parent_keys} == published | {
        "reports/capacity_review", "infra/cache_whatif_traces"}
    assert {p.to_user_string() for p in graph.get(dg.AssetKey(["reports", "capacity_review"])).parent_keys
            } == published
    # Nothing of a day runs after its publication but the trend, which is rebuilt from every published day.
    assert {c.to_user_string() for c in graph.get(dg.AssetKey(["publish", "exports"])).child_keys} == {
        "infra/capacity_trend"}


def test_a_table_its_sql_computes_alone_needs_only_its_registry_line() -> None:
    """The accounting tables have no Python of their own: their assets are built from the registry, described by
    their contracts."""
    import tokenledger.assets.accounting

    from tokenledger.catalog import TABLES

    sql_only = [t for t in TABLES if t.inputs]
    assert {t.stage for t in sql_only} == {"accounting"} and len(sql_only) == 6
    built = {k.to_user_string(): a for a in tokenledger.assets.accounting.accounting_assets for k in a.keys}
    assert set(built) == {f"{t.schema}/{t.name}" for t in sql_only}
    description = built["infra/goodput_hourly"].descriptions_by_key[dg.AssetKey(["infra", "goodput_hourly"])]
    assert description.startswith("One deployment of one model in one UTC hour")
    assert "sql/accounting/goodput_hourly.sql over usage and slo" in description


def test_the_definitions_load_with_the_bucket_unreachable(tmp_path) -> None:
    """Loading the definitions reads neither the home nor its bucket: a code server starts while the S3 endpoint is
    down (nothing listens on 127.0.0.1:9), and the error comes when a run starts, naming the bucket."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TOKENLEDGER_START_DATE", "DAGSTER_HOME")}
    env.update(TOKENLEDGER_HOME="s3://tokenledger-unreachable/home", AWS_ENDPOINT_URL="http://127.0.0.1:9",
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1",
               AWS_MAX_ATTEMPTS="1", TOKENLEDGER_WORK_DIR=str(tmp_path / "work"))
    module = ["-m", "tokenledger.pipelines.definitions"]
    loaded = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", *module], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert "All code locations passed validation" in loaded.stdout + loaded.stderr

    ran = subprocess.run([sys.executable, "-m", "dagster", "job", "execute", *module, "-j", "daily_pipeline",
                          "--tags", json.dumps({"dagster/partition": "2026-11-16"})], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0
    assert "s3://tokenledger-unreachable/home" in ran.stdout + ran.stderr
