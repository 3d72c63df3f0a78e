"""Validation is the gate between computing a day and publishing it.

For each kind of bad data, the right check fails with a readable message (table, rule, rows, examples), the
run stops before publishing, and the day published before stays exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import types
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from tokenledger.pipelines.definitions import defs

from tests.conftest import failure_text, gateway_dir, make_home, materialize, request, write_jsonl
from tokenledger.packaged import contract_file, contract_ids

DAY = "2026-11-16"


@pytest.fixture(scope="module")
def published_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A day of four requests run and published once for the module: each tamper case works on its own copy."""
    source = make_home(tmp_path_factory.mktemp("published") / "home")
    write_jsonl(gateway_dir(source, DAY) / "a.jsonl", [
        request("r1"),
        request("r2", input_tokens=6000, cached_input_tokens=5000, ttft_ms=1200.0),
        request("r3", model="m8", deployment_id=..., input_tokens=300, cached_input_tokens=0),
        request("r4", status="cancelled", output_tokens=2, e2e_ms=700.0),
    ])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENLEDGER_HOME", str(source))
        mp.setenv("TOKENLEDGER_IDLE_DAYS", "all")
        result = materialize(DAY)
    assert result.success, failure_text(result)
    yield source


def _published_copy(source: Path, home: Path) -> None:
    """The module's published day copied into the test's (empty) home, which TOKENLEDGER_HOME points at."""
    shutil.rmtree(home)
    shutil.copytree(source, home, symlinks=True)


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _tamper(home: Path, schema: str, table: str, select: str) -> None:
    """Rewrite a table's day file in the lake with `select` over its current rows (aliased t)."""
    path = home / "lake" / schema / table / f"day={DAY}" / "data.parquet"
    tmp = path.with_name("tampered.parquet")
    duckdb.connect().execute(f"COPY ({select.format(t=f'read_parquet({chr(39)}{path}{chr(39)})')}) "
                             f"TO '{tmp}' (FORMAT PARQUET)")
    tmp.replace(path)


def _rerun_checks_and_downstream(schema: str, table: str):
    """Run the table's checks and everything downstream of it (publishing included), not the table itself."""
    key = dg.AssetKey([schema, table])
    selection = dg.AssetSelection.checks_for_assets(key) | (
        dg.AssetSelection.assets(key).downstream() - dg.AssetSelection.assets(key))
    job = dg.define_asset_job("rerun_from", selection=selection, executor_def=dg.in_process_executor)
    merged = dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))
    return merged.resolve_job_def("rerun_from").execute_in_process(partition_key=DAY, raise_on_error=False)


def _failed_checks(result) -> dict[str, str]:
    return {f"{e.event_specific_data.asset_check_key.asset_key.to_user_string()}:"
            f"{e.event_specific_data.asset_check_key.name}": e.event_specific_data.description
            for e in result.all_events
            if e.event_type_value == "ASSET_CHECK_EVALUATION" and not e.event_specific_data.passed}


CASES = [
    ("negative tokens", "core", "gateway_requests",
     "SELECT * REPLACE (CASE WHEN request_id = 'r1' THEN -5 ELSE input_tokens END AS input_tokens) FROM {t}",
     "core/gateway_requests:contract", ["input_tokens >= 0: 1 of 4 row(s) fail, e.g. -5"]),
    ("cached above input", "core", "gateway_requests",
     "SELECT * REPLACE (CASE WHEN request_id = 'r1' THEN 5000 ELSE cached_input_tokens END AS cached_input_tokens) "
     "FROM {t}",
     "core/gateway_requests:contract",
     ["cached_within_input (cached_input_tokens must not exceed input_tokens): 1 of 4 row(s) fail, "
      "e.g. (1000, 5000)"]),
    ("e2e below TTFT", "core", "gateway_requests",
     "SELECT * REPLACE (CASE WHEN request_id = 'r2' THEN 10.0 ELSE e2e_ms END AS e2e_ms) FROM {t}",
     "core/gateway_requests:contract",
     ["e2e_after_ttft (e2e_ms must not be below ttft_ms): 1 of 4 row(s) fail, e.g. (10.0, 1200.0)"]),
    ("unknown status", "core", "gateway_requests",
     "SELECT * REPLACE (CASE WHEN request_id = 'r3' THEN 'okay' ELSE status END AS status) FROM {t}",
     "core/gateway_requests:contract",
     ["status in {ok, error, timeout, disconnected, rejected, cancelled}: 1 of 4 row(s) fail, e.g. 'okay'"]),
    ("duplicate ids", "core", "gateway_requests",
     "SELECT * FROM {t} UNION ALL SELECT * FROM {t} WHERE request_id = 'r2'",
     "core/gateway_requests:contract", ["(request_id) unique: 1 of 5 row(s) fail, e.g. 'r2'"]),
    ("a published table with a null key", "infra", "slo_daily",
     "SELECT * REPLACE (CASE WHEN isl_bucket = 'all' AND model = 'm8' THEN NULL ELSE model END AS model) FROM {t}",
     "infra/slo_daily:contract", ["model not null: 1 of"]),
    ("a reconciliation off by one row", "quality", "ingest_reconciliation_daily",
     "SELECT * REPLACE (CASE WHEN source = 'gateway' THEN rows_read + 1 ELSE rows_read END AS rows_read) FROM {t}",
     "quality/ingest_reconciliation_daily:contract",
     ["rows_reconcile (rows_read must equal rows_accepted + rows_quarantined + duplicates_merged + "
      "skipped_not_request + failures_no_model, and balanced must say so): 1 of 4 row(s) fail"]),
]


@pytest.mark.parametrize(("kind", "schema", "table", "select", "check", "phrases"), CASES, ids=[c[0] for c in CASES])
def test_bad_data_fails_the_right_check_and_leaves_the_published_day(home: Path, published_day: Path, kind, schema,
                                                                    table, select, check, phrases) -> None:
    _published_copy(published_day, home)
    before = _snapshot(home / "exports")
    assert before, "the day was published first"
    _tamper(home, schema, table, select)

    result = _rerun_checks_and_downstream(schema, table)

    assert not result.success
    failed = _failed_checks(result)
    assert check in failed, failed
    for phrase in phrases:
        assert phrase in failed[check], failed[check]
    assert failed[check].startswith(f"{schema}.{table} (1 day file(s)")
    assert _snapshot(home / "exports") == before
    published = [e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"
                 and e.asset_key == dg.AssetKey(["publish", "exports"])]
    assert not published


def test_too_many_bad_input_rows_block_the_day_and_few_only_warn(home: Path) -> None:
    rows = [request(f"r{i}") for i in range(1999)] + [request("bad", input_tokens=-1)]
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", rows)
    result = materialize(DAY)  # 1 of 2,000 = 0.05%: within the 0.1% tolerance, published with a warning
    assert result.success, failure_text(result)
    warned = _failed_checks(result)
    assert warned["quality/ingest_reconciliation_daily:quarantine_empty"] == (
        "2026-11-16 gateway: 1 row(s) quarantined (input_tokens 1)")
    assert "quality/ingest_reconciliation_daily:quarantine_within_tolerance" not in warned
    before = _snapshot(home / "exports")

    write_jsonl(gateway_dir(home, DAY) / "b.jsonl", [request(f"x{i}", status="okay") for i in range(5)])
    with (gateway_dir(home, DAY) / "b.jsonl").open("a") as f:
        f.write("not json\n")
    result = materialize(DAY)
    assert not result.success
    failed = _failed_checks(result)
    # A line per file, the most rows first: its first line quarantined, the rule it broke, its count.
    assert failed["quality/ingest_reconciliation_daily:quarantine_within_tolerance"].startswith(
        "too many rows quarantined (limit 0.10%); the day was not published:\n"
        "2026-11-16 gateway: 7 of 2,006 rows (0.35%) quarantined, by field: status 5, input_tokens 1, line is not "
        "valid JSON 1\n"
        f"  {gateway_dir(home, DAY) / 'b.jsonl'} line 1: status: okay is not one of ok, error, timeout, "
        "disconnected, rejected, cancelled (6 row(s))\n"
        f"  {gateway_dir(home, DAY) / 'a.jsonl'} line 2000: input_tokens: -1 is below the minimum 0 (1 row(s))\n"
        "File, line and reason of each row: ")
    assert _snapshot(home / "exports") == before


def test_warning_rules_report_without_blocking(home: Path) -> None:
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl", [request("slow", ttft_ms=700_000.0, e2e_ms=701_000.0),
                                                     request("fine")])
    result = materialize(DAY, upto=["core/gateway_requests"])
    assert result.success, failure_text(result)
    assert _failed_checks(result)["core/gateway_requests:contract_warnings"] == (
        "core.gateway_requests (1 day file(s), 2 rows): 2026-11-16 ttft_plausible (a TTFT above 10 minutes is more "
        "likely a clock or unit error than a slow request; reported, not quarantined): 1 of 2 row(s) fail, "
        "e.g. (700000.0)")


class _SchemaCheckedOnce:
    """A jsonschema validator class whose check of the schema itself against its meta-schema runs once per schema:
    `datacontract lint` checks the same ODCS schema again for every file, 0.2 s of each file's 0.25 s."""

    def __init__(self, cls: type) -> None:
        self.cls, self.checked = cls, set()

    def check_schema(self, schema: dict) -> None:
        key = json.dumps(schema, sort_keys=True)
        if key not in self.checked:
            self.cls.check_schema(schema)
            self.checked.add(key)

    def __call__(self, *args, **kwargs):
        return self.cls(*args, **kwargs)


def test_every_contract_passes_datacontract_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    contracts = [contract_file(c) for c in contract_ids()]
    assert len(contracts) >= 9
    # What `datacontract lint FILE` runs, in this process: the CLI's start-up (1.5 s) is paid once, not per file,
    # and so is the check of the ODCS schema against its meta-schema; every file is still validated against it.
    from datacontract.data_contract import DataContract
    from datacontract.lint import resolve
    from jsonschema import validators

    wrappers: dict[type, _SchemaCheckedOnce] = {}
    monkeypatch.setattr(resolve, "validators", types.SimpleNamespace(validator_for=lambda schema, *a, **k: (
        wrappers.setdefault(cls := validators.validator_for(schema, *a, **k), _SchemaCheckedOnce(cls)))))

    for path in contracts:
        run = DataContract(data_contract_file=str(path)).lint()
        assert run.has_passed(), f"{path.name}: " + "; ".join(f"{c.name}: {c.reason}" for c in run.checks)


def test_every_kept_table_has_a_contract_and_checks() -> None:
    from tokenledger.catalog import CORE_TABLES, PUBLISHED_TABLES

    graph = defs.resolve_asset_graph()
    check_keys = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    for ref in CORE_TABLES + PUBLISHED_TABLES:
        assert contract_file(ref.contract_id).is_file(), ref
        assert (f"{ref.schema}/{ref.name}", "contract") in check_keys, ref


def test_a_tables_checks_run_in_its_own_step() -> None:
    from tokenledger.catalog import TABLES

    key = dg.AssetKey(["core", "gateway_requests"])
    (step,) = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and key in a.keys]
    assert step.keys == {key}
    blocking = {spec.name: spec.blocking for spec in step.check_specs}
    assert blocking == {"contract": True, "contract_warnings": False, "models_in_inventory": True,
                        "deployments_with_requests": False, "gateway_logs_fresh": False}
    assert step.can_subset  # its checks can run alone, on the day files already written
    # Every table of the registry: its contract check is judged by the step that writes it.
    for ref in TABLES:
        table_key = dg.AssetKey([ref.schema, ref.name])
        (writer,) = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and table_key in a.keys]
        assert dg.AssetCheckKey(table_key, "contract") in writer.check_keys, ref
