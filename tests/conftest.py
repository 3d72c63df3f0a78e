"""Shared test helpers: a small hand-made home, and materializing real partitions into it through Dagster."""

from __future__ import annotations

import json
import os
import warnings
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

# Partitions are fixed when the definitions load, from the first home a process sees unless this is set: tests
# use many homes in one process, so they pin the default first day.
os.environ.setdefault("TOKENLEDGER_START_DATE", "2024-01-01")
# Likewise the last day: set and empty, partitions reach the last complete UTC day, whether or not a home was
# generated (a generated home's config/generated.yaml would otherwise end them; tests/test_generated_home.py).
os.environ.setdefault("TOKENLEDGER_END_DATE", "")

PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the checkout
SHARED = PROJECT_ROOT.parent / "shared"
FOCUS_SAMPLE = SHARED / "data" / "public" / "focus_1_0_sample" / "focus_sample.csv"

DEPLOYMENTS_YAML = """\
deployments:
  - &m70
    deployment_id: m70-h100
    model: m70
    gpu_type: H100
    gpus: 16
    gpus_per_replica: 8
    tp: 8
    pp: 1
    quantization: fp8
    cache_policy: prefix-cache
    gpu_power_w: 700
    slots_per_replica: 48
    hosting: cloud
    resource_ids: ["i-m70-*"]
    valid_from: 2026-11-01
    valid_to: 2026-11-16T12:00:00Z
  - <<: *m70
    gpus: 24
    valid_from: 2026-11-16T12:00:00Z
    valid_to: null
  - deployment_id: m8-onprem
    model: m8
    gpu_type: L40S
    gpus: 4
    gpus_per_replica: 1
    tp: 1
    pp: 1
    quantization: bf16
    cache_policy: none
    gpu_power_w: 350
    slots_per_replica: 16
    hosting: on_prem
    rate_card: onprem-l40s
    valid_from: 2026-11-01
  - deployment_id: moe-a
    model: moe
    gpu_type: H200
    gpus: 8
    gpus_per_replica: 8
    tp: 8
    pp: 1
    quantization: fp8
    cache_policy: prefix-cache
    gpu_power_w: 700
    slots_per_replica: 32
    valid_from: 2026-11-01
  - deployment_id: moe-b
    model: moe
    gpu_type: H200
    gpus: 8
    gpus_per_replica: 8
    tp: 8
    pp: 1
    quantization: fp8
    cache_policy: prefix-cache
    gpu_power_w: 700
    slots_per_replica: 32
    valid_from: 2026-11-01
"""

SLO_YAML = """\
versions:
  - slo_version: v1
    valid_from: 2026-11-01
    default:
      isl_buckets:
        - {isl_bucket: "0-4k", min_input_tokens: 0, max_input_tokens: 4096, ttft_limit_ms: 1000}
        - {isl_bucket: "4k+", min_input_tokens: 4096, max_input_tokens: null, ttft_limit_ms: 2500}
      itl_limit_ms: 100
      itl_missing: ignore
      itl_p99_ms: 100
      queue_p99_ms: 300
      tpot_p99_ms: 40
      success_rate_target: 0.9995
      attainment_target: 0.99
      stable_window_min: 30
      step_min: 5
      min_requests_per_bucket: 50
      peak_basis: busiest_5min
      agent_step_output_tokens: 247
      headroom: {n_minus_k: 1, scaling_lag_pct: 0.1, forecast_error_pct: 0.1, release_pct: 0.05, jitter_pct: 0.05}
"""

COSTS_YAML = """\
versions:
  - price_version: p1
    valid_from: 2024-01-01
    currency: USD
    deployment_tag_keys: ["tokenledger:deployment"]
    shared_tag_value: shared
    shared_cost_key: gpu_hours
    category_rules:
      - {category: gpu, service_category: Compute, sku_id: "p5*"}
      - {category: platform}
    token_class_weights: {cached: 0.1, recomputed: 1.0, output: 5.0}
    rate_cards:
      onprem-l40s: {capex_per_gpu: 11000, lifetime_hours: 35040, power_kw_per_gpu: 0.35, pue: 1.35,
                    price_per_kwh: 0.11, opex_per_gpu_hour: 0.12}
"""


# What each slow module took in `make test`: the sum of its tests' --durations (setup and call), in seconds, on
# 2026-12-07 on a host shared with other runs (about 2.5 times the times of an idle host; modules below the top 60
# tests of that run: their 2026-12-03 idle figure times 2.5). Only the order matters. pytest-xdist hands whole files
# to the two workers (--dist loadfile) in collection order, each worker taking the next file when it finishes one:
# the longest go first and the short ones fill in at the end, so neither worker is left running a long module alone.
# A slow module missing here goes last and can leave one worker running it alone while the other idles.
SLOW_MODULES = {
    "test_operations.py": 320, "test_capacity_week.py": 240, "test_publish_review.py": 200,
    "test_instance_postgres.py": 190, "test_faults_operations.py": 165, "test_week.py": 150,
    "test_ingest_gateway.py": 130, "test_accounting.py": 120, "test_focus_export.py": 115,
    "test_api_deployments.py": 95, "test_pipeline_generated.py": 87, "test_loadtest.py": 85,
    "test_cost_backfill.py": 81, "test_capacity.py": 70, "test_ingest_read_json.py": 69, "test_generate.py": 68,
    "test_definitions.py": 60, "test_capacity_loadtest.py": 57, "test_cost_focus_sample.py": 56,
    "test_checks_per_day.py": 55, "test_checks.py": 53, "test_report.py": 52, "test_cost.py": 50,
    "test_whatif.py": 46, "test_demo_fleet.py": 45, "test_lru.py": 38, "test_codex.py": 37, "test_api_pricing.py": 37,
    "test_otel.py": 33, "test_gpu.py": 30, "test_exports_datasets.py": 27, "test_schedule_sensor.py": 25,
    "test_cli_messages.py": 25, "test_adapters.py": 24, "test_ingest_billing.py": 20, "test_faults.py": 18,
    "test_loadtest_vllm.py": 15, "test_errors.py": 13, "test_fault_suite.py": 130, "test_demo_answer.py": 55,
    "test_charts.py": 20,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    weight = {item: SLOW_MODULES.get(item.path.name, 0) for item in items}
    items.sort(key=lambda item: -weight[item])  # stable: a module's tests keep their order


def request(rid: Any, **fields: Any) -> dict[str, Any]:
    """A valid, successful gateway record on 2026-11-16 for model m70; override any field, `...` drops it."""
    record = {
        "request_id": rid,
        "received_at": "2026-11-16T10:00:00Z",
        "model": "m70",
        "deployment_id": "m70-h100",
        "tenant_id": "team-a",
        "status": "ok",
        "input_tokens": 1000,
        "cached_input_tokens": 400,
        "output_tokens": 50,
        "ttft_ms": 300.0,
        "e2e_ms": 1500.0,
        "queue_ms": 20.0,
        "itl_max_ms": 40.0,
    }
    record.update(fields)
    return {k: v for k, v in record.items() if v is not ...}


def write_jsonl(path: Path, records: list[dict[str, Any] | str]) -> Path:
    """Write records (dicts, or raw strings for malformed lines) as JSON Lines; gzip when the name says so."""
    import gzip

    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def gateway_dir(home: Path, day: str) -> Path:
    return home / "raw" / "gateway" / f"dt={day}"


def make_home(root: Path) -> Path:
    """A home at `root` with the hand-made config above and an empty landing zone."""
    (root / "config").mkdir(parents=True)
    (root / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML)
    (root / "config" / "slo.yaml").write_text(SLO_YAML)
    (root / "config" / "costs.yaml").write_text(COSTS_YAML)
    (root / "raw" / "billing").mkdir(parents=True)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with the hand-made config above and TOKENLEDGER_HOME pointing at it."""
    root = make_home(tmp_path / "home")
    monkeypatch.setenv("TOKENLEDGER_HOME", str(root))
    # Many tests run a day for its config or bill alone: their days are declared idle. The test of the rule that
    # a day without logs fails (test_ingest_gateway.py) removes this.
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")
    return root


def lenient() -> dict[str, Any]:
    """Run config for tests that quarantine many rows on purpose (quarantine_within_tolerance would block)."""
    import os

    return {"resources": {"ledger": {"config": {"home": os.environ["TOKENLEDGER_HOME"],
                                                "max_quarantine_share": 1.0}}}}


def materialize(start: str, end: str | None = None, selection: list[str] | None = None,
                run_config: dict[str, Any] | None = None, upto: list[str] | None = None, instance: Any = None):
    """Run the daily job (or a selection of it) for one partition, or a range as one run, in process (in
    `instance`, else an ephemeral Dagster instance of its own).

    `upto` selects the named tables and every table upstream of them, checks included (with the tables the checks
    read): a test of a formula runs the steps its table needs through Dagster, not the whole job (publication,
    reports and the other tables)."""
    import dagster as dg
    from tokenledger.pipelines.definitions import defs

    warnings.filterwarnings("ignore")
    tags = {}
    if end and end != start:
        tags = {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end}
    job = defs.resolve_job_def("daily_pipeline")
    keys = [dg.AssetKey.from_user_string(k) for k in selection] if selection else None
    if upto:
        graph = defs.resolve_asset_graph()
        wanted = {dg.AssetKey.from_user_string(k) for k in upto}
        chosen: set = set()
        while wanted - chosen:
            chosen |= dg.AssetSelection.assets(*wanted).upstream().resolve(graph)
            wanted = chosen | {dep.asset_key for check in graph.get_check_keys_for_assets(chosen)
                               for dep in graph.get_check_spec(check).additional_deps}
        keys = sorted(chosen, key=lambda k: k.to_user_string())
    if tags:
        return job.execute_in_process(tags=tags, raise_on_error=False, asset_selection=keys, run_config=run_config,
                                      instance=instance)
    return job.execute_in_process(partition_key=start, raise_on_error=False, asset_selection=keys,
                                  run_config=run_config, instance=instance)


def failure_text(result) -> str:
    """The descriptions of all failed steps of a run, joined."""
    texts = []
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            data = event.event_specific_data
            described = getattr(getattr(data, "user_failure_data", None), "description", None)
            texts.append(described or data.error.message)
    return "\n".join(texts)


def rows(home: Path, schema: str, table: str, day: str | date, where: str = "true",
         order: str = "1") -> list[dict[str, Any]]:
    path = home / "lake" / schema / table / f"day={day}" / "data.parquet"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cur = con.execute(f"SELECT * FROM read_parquet($p) WHERE {where} ORDER BY {order}", {"p": str(path)})
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
