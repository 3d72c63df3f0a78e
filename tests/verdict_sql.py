"""The verdict's SQL (sql/capacity/capacity_verdict_daily.sql) run on hand-made rows, for the tests of the table and of
the capacity review, whose hand-made days get their verdict rows from it (the review prints them, never decides).

`verdict_rows(tables)` creates each input the SQL reads with the columns it reads (a column a hand-made row leaves
out is NULL) and returns its rows; `review_verdict_rows(...)` does so from a hand-made Review's rows and policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

import duckdb

from tokenledger.storage.duck import statement, used_params

SCHEMAS = {
    "day_slo_policy": {"model": "VARCHAR", "attainment_target": "DOUBLE", "success_rate_target": "DOUBLE",
                       "queue_p99_ms": "DOUBLE", "itl_p99_ms": "DOUBLE", "tpot_p99_ms": "DOUBLE"},
    "day_slo_isl_bucket": {"model": "VARCHAR", "isl_bucket": "VARCHAR", "bucket_order": "INTEGER"},
    "day_slo_daily": {"model": "VARCHAR", "isl_bucket": "VARCHAR", "attainment": "DOUBLE",
                      "attainment_target": "DOUBLE", "attainment_met": "BOOLEAN", "success_rate": "DOUBLE",
                      "success_rate_target": "DOUBLE", "success_rate_met": "BOOLEAN", "queue_p99_ms": "DOUBLE",
                      "queue_p99_met": "BOOLEAN", "itl_p99_ms": "DOUBLE", "itl_p99_met": "BOOLEAN",
                      "tpot_p99_ms": "DOUBLE", "tpot_p99_met": "BOOLEAN", "all_met": "BOOLEAN"},
    "day_capacity_plan": {"model": "VARCHAR", "deployment_id": "VARCHAR", "gpus_needed": "DOUBLE",
                          "binding_sizing": "VARCHAR", "gpus_deployed": "DOUBLE", "gpus_per_replica": "INTEGER",
                          "headroom_failure_replicas": "INTEGER", "headroom_n_minus_k": "INTEGER",
                          "headroom_failure_domain": "VARCHAR", "base_gpus": "DOUBLE",
                          "goodput_sizing_base_gpus": "DOUBLE", "headroom_scaling_lag_pct": "DOUBLE",
                          "headroom_forecast_error_pct": "DOUBLE", "headroom_release_pct": "DOUBLE",
                          "headroom_jitter_pct": "DOUBLE", "hours_over_capacity": "BIGINT"},
    "day_capacity": {"model": "VARCHAR", "deployment_id": "VARCHAR", "capacity_source": "VARCHAR",
                     "capacity_verified": "BOOLEAN", "loadtest_run_id": "VARCHAR",
                     "other_configuration_run_id": "VARCHAR", "other_configuration_differences": "VARCHAR"},
    "day_cost_per_mtok": {"model": "VARCHAR", "deployment_id": "VARCHAR", "currency": "VARCHAR",
                          "cost_per_mtok_output": "DOUBLE", "cost_per_mtok_goodput": "DOUBLE"},
    "day_deployments": {"model": "VARCHAR", "deployment_id": "VARCHAR", "kind": "VARCHAR"},
}


def verdict_rows(tables: Mapping[str, Sequence[Mapping[str, Any]]], day: str = "2026-11-17") -> list[dict[str, Any]]:
    """The verdict's rows (in its order) from the hand-made inputs: each table's rows, their columns of SCHEMAS."""
    con = duckdb.connect()
    for name, columns in SCHEMAS.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
        for row in tables.get(name, []):
            kept = {c: v for c, v in row.items() if c in columns}
            if kept:
                con.execute(f"INSERT INTO {name} BY NAME SELECT " + ", ".join(f"${c} AS {c}" for c in kept), kept)
    text = statement("capacity_verdict_daily")
    cursor = con.execute(text, used_params(text, {"day": day}))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def review_verdict_rows(day: date, policy: Mapping[str, Mapping[str, Any]], slo: Sequence[Mapping[str, Any]],
                        plan: Sequence[Mapping[str, Any]], capacity: Sequence[Mapping[str, Any]],
                        cost_history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The verdict of a hand-made Review's day, as infra.capacity_verdict_daily would publish it: its GPU
    deployments (the plan's rows) and, as hosted-API deployments, every other model with SLO or cost rows (its
    deployment as the cost rows name it, else the model's name)."""
    gpu = {p["model"] for p in plan} | {c["model"] for c in capacity}
    today = [r for r in cost_history if r["day"] == day]
    hosted = {(r["model"], r["deployment_id"]) for r in today if r["model"] not in gpu}
    hosted |= {(r["model"], r["model"]) for r in slo if r["model"] not in gpu | {m for m, _ in hosted}}
    buckets = [{"model": m, "isl_bucket": b["isl_bucket"], "bucket_order": k} for m, p in policy.items()
               for k, b in enumerate(p.get("isl_buckets", []))]
    return verdict_rows({"day_slo_policy": [{"model": m, **p} for m, p in policy.items()],
                         "day_slo_isl_bucket": buckets, "day_slo_daily": slo, "day_capacity_plan": plan,
                         "day_capacity": capacity,
                         "day_cost_per_mtok": today,
                         "day_deployments": [{"model": m, "deployment_id": d, "kind": "api"} for m, d in hosted]},
                        day.isoformat())
