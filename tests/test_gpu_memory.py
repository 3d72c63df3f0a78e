"""The GPU memory budget (infra.gpu_memory_daily, sql/capacity/gpu_memory_daily.sql; docs/metrics.md section 6).

First on hand-made inputs run straight through the SQL (no Dagster): a 70B FP8 model on 80 GiB GPUs worked by hand,
each flag firing and not, fewer KV heads than tp with pipeline parallelism, and missing inventory facts giving NULL
figures with a note naming them. Then one day of conftest's home through Dagster: the table is written for every GPU
deployment, passes its contract, and its 70B row is the budget worked out here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import DEPLOYMENTS_YAML, failure_text, gateway_dir, materialize, request, rows, write_jsonl
from tokenledger.storage.duck import statement, used_params

GIB = 2**30
SCHEMAS = {
    "day_deployments": {
        "model": "VARCHAR", "deployment_id": "VARCHAR", "kind": "VARCHAR", "gpu_type": "VARCHAR", "tp": "INTEGER",
        "pp": "INTEGER", "gpus_per_replica": "INTEGER", "quantization": "VARCHAR", "params_billion": "DOUBLE",
        "weight_bytes_per_param": "DOUBLE", "num_layers": "INTEGER", "num_kv_heads": "INTEGER", "head_dim": "INTEGER",
        "kv_bytes_per_element": "DOUBLE", "gpu_memory_gib": "DOUBLE", "gpu_memory_utilization": "DOUBLE",
        "runtime_memory_gib": "DOUBLE", "max_model_len": "INTEGER", "max_num_seqs": "INTEGER",
        "in_force_from": "TIMESTAMPTZ", "in_force_to": "TIMESTAMPTZ"},
    "day_requests": {"deployment_id": "VARCHAR", "status": "VARCHAR", "input_tokens": "BIGINT",
                     "output_tokens": "BIGINT"},
    "day_capacity_plan": {"deployment_id": "VARCHAR", "littles_law_concurrency": "DOUBLE", "gpus_deployed": "DOUBLE"},
}

# The 70B FP8 model on two 80 GiB GPUs (TP2): 70.6e9 parameters at 1 byte, 80 layers, 8 KV heads of 128, an FP8
# KV cache, the engine given 90% of each GPU and 4 GiB of runtime.
M70 = {"model": "m70", "deployment_id": "m70-a", "kind": "gpu", "gpu_type": "H100", "tp": 2, "pp": 1,
       "gpus_per_replica": 2, "quantization": "fp8", "params_billion": 70.6, "weight_bytes_per_param": 1.0,
       "num_layers": 80, "num_kv_heads": 8, "head_dim": 128, "kv_bytes_per_element": 1.0, "gpu_memory_gib": 80.0,
       "gpu_memory_utilization": 0.9, "runtime_memory_gib": 4.0, "max_model_len": 32768, "max_num_seqs": 256,
       "in_force_from": datetime(2026, 11, 17, tzinfo=UTC), "in_force_to": datetime(2026, 11, 18, tzinfo=UTC)}

# Weights per GPU: 70.6e9 * 1 byte / 2 GPUs = 35.3e9 bytes = 32.8757 GiB.
WEIGHTS_GIB = 70.6e9 / 2 / GIB
# KV cache per GPU: 80 GiB * 0.9 = 72 GiB for the engine, less weights and 4 GiB runtime = 35.1243 GiB; the margin
# is what the engine leaves: 80 - 72 = 8 GiB.
KV_GIB = 72 - WEIGHTS_GIB - 4
# KV bytes per token per GPU: 2 (K and V) * 80 layers * 8 heads / TP 2 * 128 * 1 byte = 81,920 (80 KiB).
KV_BYTES = 2 * 80 * 4 * 128 * 1
# KV capacity: (68 * 2^30 - 35.3e9) bytes / 81,920 = 37,714,444,032 / 81,920 = 460,381.4 -> 460,381 tokens.
KV_TOKENS = 460_381


def _contexts(deployment_id: str) -> list[dict[str, Any]]:
    """100 effective requests that reached the model: 98 of 3,000 tokens (2,500 in + 500 out) and 2 of 30,000
    (29,000 + 1,000); mean (98 * 3,000 + 2 * 30,000) / 100 = 3,540, P99 the 99th of 100 sorted = 30,000. A cancelled
    and a rejected request of 200,000 tokens do not count."""
    return ([{"deployment_id": deployment_id, "status": "ok", "input_tokens": 2500, "output_tokens": 500}] * 97
            + [{"deployment_id": deployment_id, "status": "error", "input_tokens": 2900, "output_tokens": 100}]
            + [{"deployment_id": deployment_id, "status": "ok", "input_tokens": 29_000, "output_tokens": 1000}] * 2
            + [{"deployment_id": deployment_id, "status": s, "input_tokens": 199_000, "output_tokens": 1000}
               for s in ("cancelled", "rejected")])


def budget(deployments: list[dict[str, Any]], requests: list[dict[str, Any]], plan: list[dict[str, Any]]
           ) -> dict[str, dict[str, Any]]:
    """infra.gpu_memory_daily's rows by deployment_id from hand-made inputs (a column a row leaves out is NULL)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, columns in SCHEMAS.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
        for row in {"day_deployments": deployments, "day_requests": requests, "day_capacity_plan": plan}[name]:
            kept = {c: v for c, v in row.items() if c in columns}
            con.execute(f"INSERT INTO {name} BY NAME SELECT " + ", ".join(f"${c} AS {c}" for c in kept), kept)
    text = statement("gpu_memory_daily")
    cursor = con.execute(text, used_params(text, {"day": "2026-11-17"}))
    names = [d[0] for d in cursor.description]
    got = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    for r in got:  # the contract's row rule: the four parts add up to the GPU's memory
        if r["margin_gib"] is not None:
            assert r["weights_gib"] + r["kv_cache_gib"] + r["runtime_memory_gib"] + r["margin_gib"] == pytest.approx(
                r["gpu_memory_gib"], abs=1e-9)
    return {r["deployment_id"]: r for r in got}


def test_a_70b_fp8_model_on_80_gib_gpus_worked_by_hand() -> None:
    # Two replicas in force (4 GPUs / 2) and 200 in flight at the planning peak: 100 per replica.
    got = budget([M70], _contexts("m70-a"), [{"deployment_id": "m70-a", "littles_law_concurrency": 200.0,
                                              "gpus_deployed": 4.0}])["m70-a"]
    assert got["weights_gib"] == pytest.approx(32.8757, abs=1e-4) == pytest.approx(WEIGHTS_GIB)
    assert got["kv_cache_gib"] == pytest.approx(35.1243, abs=1e-4) == pytest.approx(KV_GIB)
    assert got["margin_gib"] == pytest.approx(8.0)
    assert (got["kv_heads_per_gpu"], got["layers_per_gpu"], got["kv_bytes_per_token"]) == (4, 80, KV_BYTES) == (
        4, 80, 81_920)
    assert got["kv_capacity_tokens"] == KV_TOKENS == int(KV_GIB * GIB / KV_BYTES)
    assert (got["context_requests"], got["context_mean_tokens"], got["context_p99_tokens"]) == (100, 3540.0, 30_000)
    # 460,381 / 3,540 = 130.05 sequences at the mean context, 460,381 / 30,000 = 15.35 at the P99, and 14.05 of the
    # longest context allowed (32,768 tokens).
    assert got["kv_sequences_at_mean"] == pytest.approx(KV_TOKENS / 3540) == pytest.approx(130.05, abs=0.01)
    assert got["kv_sequences_at_p99"] == pytest.approx(15.35, abs=0.01)
    assert got["kv_sequences_at_max_model_len"] == pytest.approx(KV_TOKENS / 32768)
    # 100 per replica against 90% of 130.05 = 117.05: not near the limit; 8 GiB of margin: the KV does not take all.
    assert (got["replicas_in_force"], got["observed_concurrency_per_replica"]) == (2, 100.0)
    assert (got["kv_takes_all_memory"], got["concurrency_near_kv_limit"]) == (False, False)
    assert got["memory_note"] == (
        "within budget: a margin is left and the peak's concurrency per replica is under 90% of the sequences the KV "
        "cache holds at the mean context")  # max_num_seqs, 256, is above the 130.05 sequences: not named


def test_each_flag_fires_and_does_not() -> None:
    # m70-b: the engine given all of each GPU (utilization 1): KV = 80 - 32.8757 - 4 = 43.1243 GiB, margin 0.
    # Its concurrency 2 x 118 = 236 over 2 replicas is 118 per replica, at least 90% of 130.05 (117.05) at m70-a's
    # contexts.
    full = {**M70, "deployment_id": "m70-b", "gpu_memory_utilization": 1.0}
    got = budget([M70, full], _contexts("m70-a") + _contexts("m70-b"),
                 [{"deployment_id": "m70-a", "littles_law_concurrency": 2 * 117.0, "gpus_deployed": 4.0},
                  {"deployment_id": "m70-b", "littles_law_concurrency": 2 * 118.0, "gpus_deployed": 4.0}])
    a, b = got["m70-a"], got["m70-b"]
    assert b["kv_cache_gib"] == pytest.approx(80 - WEIGHTS_GIB - 4) and b["margin_gib"] == pytest.approx(0, abs=1e-9)
    assert b["kv_takes_all_memory"] is True and a["kv_takes_all_memory"] is False
    # m70-a: 117 per replica < 117.05 (0.9 x 130.05): not yet; m70-b holds more ((76 * 2^30 - 35.3e9) / 81,920 =
    # 565,238.02 -> 565,238 tokens, 159.67 sequences at 3,540, 90% = 143.7), so 118 is not near its limit either.
    assert a["observed_concurrency_per_replica"] == 117.0 and a["concurrency_near_kv_limit"] is False
    assert b["kv_capacity_tokens"] == int((80 - WEIGHTS_GIB - 4) * GIB / KV_BYTES) == 565_238
    assert b["concurrency_near_kv_limit"] is False
    assert b["memory_note"].startswith("no margin: the KV cache takes all memory left after weights and runtime")
    # At 118 per replica on m70-a: 118 >= 117.05, the flag fires and the note says so.
    near = budget([M70], _contexts("m70-a"),
                  [{"deployment_id": "m70-a", "littles_law_concurrency": 2 * 118.0, "gpus_deployed": 4.0}])["m70-a"]
    assert near["concurrency_near_kv_limit"] is True and near["kv_takes_all_memory"] is False
    assert near["memory_note"].startswith("the peak's concurrency per replica is at least 90% of the sequences")


def test_fewer_kv_heads_than_tp_and_pipeline_stages() -> None:
    # 4 KV heads over TP 8: each GPU keeps one head (not half of one); 80 layers over PP 2: 40 per GPU. KV bytes per
    # token per GPU: 2 * 40 * 1 * 128 * 2 bytes (BF16) = 20,480. Weights over tp x pp = 16 GPUs: 70.6e9 * 2 / 16.
    wide = {**M70, "deployment_id": "m70-w", "tp": 8, "pp": 2, "gpus_per_replica": 16, "num_kv_heads": 4,
            "weight_bytes_per_param": 2.0, "kv_bytes_per_element": 2.0}
    got = budget([wide], [], [{"deployment_id": "m70-w", "littles_law_concurrency": 0.0, "gpus_deployed": 16.0}]
                 )["m70-w"]
    assert (got["kv_heads_per_gpu"], got["layers_per_gpu"], got["kv_bytes_per_token"]) == (1, 40, 20_480)
    assert got["weights_gib"] == pytest.approx(70.6e9 * 2 / 16 / GIB)
    # No request: no context, so no sequences and no concurrency flag; the capacity in tokens stands.
    assert got["kv_capacity_tokens"] == int((72 - 70.6e9 * 2 / 16 / GIB - 4) * GIB / 20_480)
    assert (got["context_requests"], got["kv_sequences_at_mean"], got["concurrency_near_kv_limit"]) == (0, None, None)
    assert "fewer KV heads than tp: each GPU keeps a copy of one head" in got["memory_note"]
    assert "no effective request reached the model" in got["memory_note"]


def test_missing_facts_give_null_figures_and_a_note_naming_them() -> None:
    # Without num_layers and head_dim the KV bytes per token, capacity, sequences and the concurrency flag are NULL;
    # the weights (params, bytes, tp) and the memory split still follow. Without runtime_memory_gib too: no KV.
    partial = {**M70, "num_layers": None, "head_dim": None}
    bare = {**M70, "deployment_id": "m70-c", "num_layers": None, "head_dim": None, "runtime_memory_gib": None,
            "params_billion": None, "kv_bytes_per_element": None}
    got = budget([partial, bare], _contexts("m70-a"),
                 [{"deployment_id": "m70-a", "littles_law_concurrency": 200.0, "gpus_deployed": 4.0}])
    a, c = got["m70-a"], got["m70-c"]
    assert a["weights_gib"] == pytest.approx(WEIGHTS_GIB) and a["kv_cache_gib"] == pytest.approx(KV_GIB)
    assert [a[k] for k in ("kv_bytes_per_token", "kv_capacity_tokens", "kv_sequences_at_mean", "kv_sequences_at_p99",
                           "concurrency_near_kv_limit")] == [None] * 5
    assert a["kv_takes_all_memory"] is False and a["context_mean_tokens"] == 3540.0
    assert a["memory_note"] == ("the inventory lacks num_layers, head_dim: the figures that need them are not "
                                "computed")
    assert [c[k] for k in ("weights_gib", "kv_cache_gib", "margin_gib", "kv_capacity_tokens", "kv_takes_all_memory",
                           "observed_concurrency_per_replica")] == [None] * 6
    assert c["memory_note"].startswith("the inventory lacks params_billion, num_layers, head_dim, "
                                       "kv_bytes_per_element, runtime_memory_gib: the figures that need them are not "
                                       "computed")


# --- one day through Dagster -----------------------------------------------------------------------------------------

DAY = "2026-11-17"
T0 = datetime(2026, 11, 17, 10, tzinfo=UTC)
# conftest's m70 (TP 8, 8 GPUs a replica, 24 GPUs in force on the day: 3 replicas) with its memory facts.
MEMORY = ("    model: m70\n    params_billion: 70.6\n    num_layers: 80\n    num_kv_heads: 8\n    head_dim: 128\n"
          "    kv_bytes_per_element: 1\n    gpu_memory_gib: 80\n    runtime_memory_gib: 4\n    max_model_len: 32768\n"
          "    max_num_seqs: 256\n")


def test_the_day_publishes_a_budget_per_gpu_deployment(home: Path) -> None:
    (home / "config" / "deployments.yaml").write_text(DEPLOYMENTS_YAML.replace("    model: m70\n", MEMORY))
    # 10 requests of m70 a minute apart from 10:00, 1,000 in + 50 out = 1,050 tokens each, 1.5 s each.
    write_jsonl(gateway_dir(home, DAY) / "a.jsonl",
                [request(f"r{k}", received_at=(T0 + timedelta(minutes=k)).strftime("%Y-%m-%dT%H:%M:%SZ"))
                 for k in range(10)])
    result = materialize(DAY, upto=["infra/gpu_memory_daily"])
    assert result.success, failure_text(result)
    got = {r["deployment_id"]: r for r in rows(home, "infra", "gpu_memory_daily", DAY)}
    assert sorted(got) == ["m70-h100", "m8-onprem", "moe-a", "moe-b"]
    m70 = got["m70-h100"]
    # FP8 weights (1 byte, from the quantization) over TP 8: 70.6e9 / 8 = 8.825e9 bytes = 8.2189 GiB; the engine's
    # 0.9 (the default) of 80 GiB = 72, less 8.2189 and 4: KV 59.7811 GiB. One KV head per GPU (8 / 8): 2 * 80 * 1
    # * 128 * 1 = 20,480 bytes a token, so (68 * 2^30 - 8.825e9) / 20,480 = 3,134,250.2 -> 3,134,250 tokens.
    assert (m70["weight_bytes_per_param"], m70["gpu_memory_utilization"]) == (1.0, 0.9)
    assert m70["weights_gib"] == pytest.approx(8.2189, abs=1e-4)
    assert m70["kv_cache_gib"] == pytest.approx(72 - 70.6e9 / 8 / GIB - 4)
    assert m70["kv_bytes_per_token"] == 20_480
    assert m70["kv_capacity_tokens"] == (68 * GIB - 8_825_000_000) // 20_480 == 3_134_250
    # Every context 1,050: 2,985.0 sequences at the mean and at the P99.
    assert (m70["context_requests"], m70["context_mean_tokens"], m70["context_p99_tokens"]) == (10, 1050.0, 1050)
    assert m70["kv_sequences_at_mean"] == pytest.approx(3_134_250 / 1050)
    # The planning peak: 5 requests in the busiest 5 minutes (10:00-10:05) = 1/60 req/s x 1.5 s = 0.025 in flight,
    # over 3 replicas.
    assert m70["replicas_in_force"] == 3
    assert m70["observed_concurrency_per_replica"] == pytest.approx(5 / 300 * 1.5 / 3)
    assert (m70["kv_takes_all_memory"], m70["concurrency_near_kv_limit"]) == (False, False)
    # 2,985.0 sequences fit, but the engine batches at most 256 (max_num_seqs): the note says which binds first.
    assert m70["memory_note"].endswith("; max_num_seqs caps concurrent sequences below what the KV cache holds at "
                                       "the mean context")
    # conftest's other deployments declare no memory facts: their budgets are NULL and say why.
    m8 = got["m8-onprem"]
    assert (m8["weight_bytes_per_param"], m8["weights_gib"], m8["kv_capacity_tokens"]) == (2.0, None, None)
    assert m8["memory_note"] == ("the inventory lacks params_billion, num_layers, num_kv_heads, head_dim, "
                                 "kv_bytes_per_element, gpu_memory_gib, runtime_memory_gib: the figures that need "
                                 "them are not computed; no effective request reached the model: no context to count "
                                 "sequences by")


# --- the review ------------------------------------------------------------------------------------------------------

def test_the_review_prints_each_deployments_budget_from_its_published_cells() -> None:
    from tokenledger.report.review import Review, render_html, render_markdown, tables

    got = budget([M70, {**M70, "deployment_id": "m70-b", "gpu_memory_utilization": 1.0}],
                 _contexts("m70-a") + _contexts("m70-b"),
                 [{"deployment_id": d, "littles_law_concurrency": 200.0, "gpus_deployed": 4.0}
                  for d in ("m70-a", "m70-b")])
    memory = list(got.values())
    cap = {"model": "m70", "deployment_id": "m70-a", "gpu_type": "H100", "gpus": 4.0, "tp": 2, "pp": 1,
           "quantization": "fp8", "output_tokens": 1, "slo_version": "v1"}
    review = Review(day=datetime(2026, 11, 17).date(), capacity=[cap], plan=[], load=[], slo=[], cost_history=[],
                    policy={}, memory=memory)
    budget_tables = {t.caption: t for t in tables(review) if str(t.caption).startswith("Memory budget")}
    assert sorted(budget_tables) == ["Memory budget of m70-a, per GPU", "Memory budget of m70-b, per GPU"]
    a = dict(budget_tables["Memory budget of m70-a, per GPU"].text_rows())
    # The hand-worked budget as the review formats it: 4 significant digits, tokens whole.
    assert (a["weights per GPU (GiB)"], a["KV cache per GPU (GiB)"], a["margin per GPU, left unused (GiB)"]) == (
        "32.88", "35.12", "8")
    assert (a["KV bytes per token, per GPU"], a["KV capacity per replica (tokens)"]) == ("81,920", "460,381")
    assert a["sequences it holds at the mean context (3,540 tokens)"] == "130.1"
    assert a["sequences it holds at the P99 context (30,000 tokens)"] == "15.35"
    assert (a["concurrency per replica at the planning peak (Little's law)"],
            a["no margin: the KV cache takes all memory left"]) == ("100", "no")
    page, markdown = render_html(review), render_markdown(review)
    # Every figure is its published cell: table, column and key on the span.
    assert ('<span data-table="infra.gpu_memory_daily" data-column="kv_capacity_tokens" data-key="m70|m70-a" '
            'data-format="tokens">460,381</span>') in page
    # m70-b keeps no margin: a line on the model's screen, outside the folded details, says so.
    screen = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    assert "Memory budget of" in screen and "no margin: the KV cache takes all memory left after weights" in screen
    assert "m70-a</span>: within budget" not in screen  # a budget within limits is not raised on the screen
    assert "#### Memory budget of m70-a" in markdown and "| KV capacity per replica (tokens) | 460,381 |" in markdown
